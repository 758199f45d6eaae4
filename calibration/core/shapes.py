"""The three sizes a calibration runs: the bounded warmup, the probe, the target it predicts --
one value from the command line to the run and the lifecycle."""

from __future__ import annotations

from attrs import field, frozen

from artifact.point import Point


@frozen
class Shapes:
    """The warmup, the probe and the target (each a ``Point``; given ones may be partial)."""

    warmup: Point = field(hash=False)
    probe: Point = field(hash=False)
    target: Point = field(hash=False)


@frozen
class ExtraSize:
    """One size measured beyond the probe: where, why, and its cost (one run, over the target's)."""

    point: Point = field(hash=False)
    reason: str
    cost: float
