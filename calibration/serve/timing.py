"""Each stage's time at any request, from the calibration's estimate at its target.

The estimate gives a stage's time outside its iterations (kept) and its time per iteration at the
target's ``time ~`` measure; a request's per-iteration time is that carried by the ratio of its
measure to the target's (the estimator's one-size rule), times its iterations. Exact at the
calibration's target; elsewhere the ratio, which over-counts a fixed per-call cost (conservative).
"""

from __future__ import annotations

from attrs import frozen

from artifact.ir import StageValues
from runtime.estimate import StageTime
from runtime.estimate.results import Measure


@frozen
class StageClock:
    """One stage: its fixed time, its time per iteration per unit of measure (or per iteration,
    where the target's measure is 0)."""

    stage: str
    fixed_s: float
    per_iteration_s: float  # at the target's measure
    target_measure: float  # 0: not scaled by measure

    def seconds(self, values: StageValues) -> float:
        """The stage's time at a request whose stage evaluates to ``values``."""
        return self.at(values.time, values.iterations)

    def at(self, time: Measure, iterations: int) -> float:
        """The stage's time at a request whose stage's ``time ~`` measure and iterations are
        these (``seconds`` without a ``StageValues``: the predictor reads them flat)."""
        per = self.per_iteration_s
        if self.target_measure:
            per *= float(time) / self.target_measure
        return self.fixed_s + per * iterations


def stage_clock(stage: StageTime) -> StageClock:
    """A stage's clock from its estimate (no time: a clock of 0 s, unused: the request's time is
    then unknown, ``RequestPredictor.untracked_s`` None)."""
    if stage.seconds is None:
        return StageClock(stage.stage, 0.0, 0.0, 0.0)
    per = stage.per_iteration_s
    if per is None:  # measured at the target: its time per iteration there
        per = (stage.seconds - stage.fixed_s) / max(1, stage.target_iterations)
    measure = float(stage.target_measure) if stage.target_measure else 0.0
    return StageClock(stage.stage, stage.fixed_s, per, measure)
