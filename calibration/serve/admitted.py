"""The worker the HTTP face serves with: the lifecycle's session served through
``serve.worker.Worker`` (admission once before any work; RUN, REPLACE then the placement in force
back, or ``RequestRefused``), its ``Served`` turned into the app's ``Answer``.

Each answer sets every phase's predicted bound beside its measured peak; a phase measured above
its bound is a drift event (a warning in the log, ``wf_drift_events_total``): its shape and excess
join a bounded history, and from then on that shape and every larger one (each int param at least
as large, the flags equal) is admitted conservatively, with the excess added to the device's
reserve (a RUN may become a REPLACE that streams more, or a refusal). ``close`` undoes the hooks
and writes the served records to the state folder.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs
from attrs import define, frozen

from artifact.point import Point
from artifact.spelling import point_text
from artifact.units import show_bytes
from calibration.plan.model import Device
from calibration.serve.admission import DecisionKind
from calibration.serve.answer import Answer, PhasePeak
from calibration.serve.state import StateFolder
from calibration.serve.warm import Started
from calibration.serve.worker import Served, Worker
from runtime import Pipeline

if TYPE_CHECKING:
    from calibration.core.session import Session
    from runtime.measure.request import Request

log = logging.getLogger(__name__)
#: Drift events remembered (the newest): the shapes served conservatively.
DRIFTS_KEPT = 32


@frozen
class Drift:
    """A served shape measured above its bound, and by how much (the worst phase)."""

    params: Point
    excess_bytes: int

    def covers(self, params: Point) -> bool:
        """Whether ``params`` is this shape or larger: each int param at least as large, each
        flag the same."""
        for name, value in self.params.items():
            asked = params.get(name)
            if type(value) is bool or type(asked) is bool:
                if asked != value:
                    return False
            elif not isinstance(asked, int) or asked < value:
                return False
        return True


@define
class _Output:
    """The pipeline's output of the request being served (the recorder keeps only figures)."""

    value: object = None


class AdmittedWorker:
    """Serves the lifecycle's session (``Started``) through ``Worker`` until ``close``."""

    def __init__(
        self,
        session: Session,
        started: Started,
        defaults: Point,
        state: StateFolder | None,
        device: Device,
        on_close: Callable[[], object] = lambda: None,
    ) -> None:
        self.inner = Worker.after(started.outcome, session, device)  # NotServing: said why
        self.session, self.started, self.state = session, started, state
        self._defaults = dict(defaults)
        self.drifts: deque[Drift] = deque(maxlen=DRIFTS_KEPT)
        self.closed, self.on_close = False, on_close

    @property
    def pipeline(self) -> Pipeline:
        return self.session.formulas

    @property
    def defaults(self) -> Point:
        return self._defaults

    def serve(self, params: Point) -> Answer:
        """One request through admission; ``RequestRefused`` and ``RequestFailed`` propagate."""
        with self._kept_output() as output, self._cautious(params):
            served = self.inner.serve(params)
        drift = not all(p.within for p in served.phases)
        if drift:
            _log_drift(served)
            excess = max((p.measured_bytes or 0) - p.predicted_bytes for p in served.phases)
            self.drifts.append(Drift(MappingProxyType(dict(params)), excess))
        rows = tuple(PhasePeak(p.label, p.predicted_bytes, p.measured_bytes) for p in served.phases)
        kind = served.decision.kind
        replaced = kind is DecisionKind.REPLACE
        return Answer(kind.value, rows, served.seconds, output.value, drift, replaced)

    @contextlib.contextmanager
    def _cautious(self, params: Point) -> Iterator[None]:
        """Admission inside the block with the largest excess of a drift that covers ``params``
        added to the reserve (the device as configured afterwards)."""
        excess = max((d.excess_bytes for d in self.drifts if d.covers(params)), default=0)
        device = self.inner.device
        if excess:
            log.info(
                "serving %s conservatively: %s more reserved",
                point_text(params),
                show_bytes(excess),
            )
            self.inner.device = attrs.evolve(device, reserve_bytes=device.reserve + excess)
        try:
            yield
        finally:
            self.inner.device = device

    @contextlib.contextmanager
    def _kept_output(self) -> Iterator[_Output]:
        """``session.body`` keeps its output for the answer inside the block (an instance
        attribute over the method, taken off after)."""
        session, output = self.session, _Output()
        body = session.body

        def keeping(req: Request) -> object:
            output.value = body(req)
            return output.value

        vars(session)["body"] = keeping
        try:
            yield output
        finally:
            vars(session).pop("body", None)

    def close(self) -> None:
        """Undo the hooks in force (once) and write the served records to the state folder."""
        if self.closed:
            return
        self.closed = True
        if self.inner.applied is not None:
            self.inner.applied.undo()
            self.inner.applied = None
        log.info("closed: every hook removed, every module back on its device")
        if self.state is not None:
            served = self.session.recorder.served
            self.state.flush_served(served)
            log.info("closed: %d served records written to %s", len(served), self.state.root)
        self.on_close()


def _log_drift(served: Served) -> None:
    for p in served.phases:
        if not p.within:
            log.warning(
                "drift: %s phase %s measured %s, above its bound %s",
                point_text(served.prediction.params),
                p.label,
                show_bytes(p.measured_bytes),
                show_bytes(p.predicted_bytes),
            )
