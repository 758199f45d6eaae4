"""What the HTTP face needs of a worker (``Worker``), and what one served request answers
(``Answer``): the worker is one object it calls, whatever decides and runs inside it."""

from __future__ import annotations

from typing import Protocol

from attrs import field, frozen

from artifact.point import Point
from runtime import Pipeline


@frozen
class PhasePeak:
    """One phase of a served request: the peak predicted before it ran, and the one measured."""

    phase: str
    predicted: int | None
    measured: int | None


@frozen
class Answer:
    """One served request: the decision taken, each phase's peaks, the time, the output."""

    decision: str
    phases: tuple[PhasePeak, ...]
    seconds: float
    output: object = field(eq=False, repr=False)
    drift: bool = False  # a phase measured above its bound
    replanned: bool = False  # the placement was changed for this request (or after it)


class Worker(Protocol):
    """One pipeline serving requests one at a time (docs/serving.md).

    ``serve`` raises ``runtime.FormulaError`` or ``calibration.errors.CalibrationError`` for a
    request it refuses (a 422 with the message), anything else for a request that failed."""

    @property
    def pipeline(self) -> Pipeline:
        """The loaded formulas: a body's params are checked against them before queueing."""

    @property
    def defaults(self) -> Point:
        """The values of the params a request leaves out (the validated target's)."""

    def serve(self, params: Point) -> Answer: ...

    def idle(self) -> bool:
        """No request waits: work that can wait for that (a re-plan); whether it re-placed."""

    def close(self) -> None:
        """Undo every hook and flush the records (at shutdown)."""
