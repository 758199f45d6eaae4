"""Time findings need clean evidence (calibration.probes.time_evidence): a time term that is really
wrong, timed on a deterministic clock in three runs, is a `formula-mismatch`, and so it stays when
one run of every size is a burst (the medians skip it); the same miss on a clock whose runs truly
disagree (the medians far above the fastest runs), or timed in two runs, is a `time-unknown` note,
never an alarm. The clock here is the lifecycle tests' ``Steady`` one plus the seconds the
pipeline's steps spend by their real work, so nothing depends on the machine's load."""

from __future__ import annotations

import pytest
import torch

from calibration.calibrate.run import Calibration, calibrate_session
from calibration.calibrate.verdict import verdict
from calibration.core.session import Session
from calibration.probes.findings import ACTIONABLE, NOTES
from runtime.kinds import FindingKind, Quantity
from tests.calibration.lifecycle_setup import Steady
from tests.calibration.probes.kinked import Kink, Kinked, Transformer, formula_text

TARGET = {"steps": 2, "frames": 24, "height": 96, "width": 96}
PROBE = {"steps": 1, "frames": 16, "height": 32, "width": 32}
WARMUP = {"steps": 1, "frames": 4, "height": 16, "width": 16}
#: Seconds a step spends per unit of its real work, ``frames * (height * width)**2`` (attention
#: over pixels), where the formula declares ``time ~ frames * height * width``: wrong along the
#: area. The clock is virtual: nothing waits.
PER_UNIT = 1e-8


class WorkClock(Steady):
    """``Steady`` plus the seconds the steps spend; with ``burst``, a busy neighbour's burst in
    one run of every size (its second step of that work takes three times as long): the median
    of a size's runs skips it, their range does not; with ``disagree``, a burst over two runs of
    every three (each step of that work but every third takes three times as long): the runs
    truly disagree, the median sits far above the fastest run."""

    def __init__(self, burst: bool = False, disagree: bool = False) -> None:
        super().__init__()
        self.burst, self.disagree = burst, disagree
        self.seen: dict[float, int] = {}

    def spend(self, seconds: float) -> None:
        self.seen[seconds] = self.seen.get(seconds, 0) + 1
        factor = 3 if self.burst and self.seen[seconds] == 2 else 1
        if self.disagree:
            factor = 1 if self.seen[seconds] % 3 == 1 else 3
        self.jump(seconds * factor)


class Attending(Transformer):
    """A step whose time grows with frames squared: the work the formula leaves out."""

    def __init__(self, clock: WorkClock) -> None:
        super().__init__()
        self.clock = clock

    def forward(self, frames: int, height: int, width: int) -> torch.Tensor:
        self.clock.spend(PER_UNIT * frames * (height * width) ** 2)
        return super().forward(frames, height, width)


def calibrate(clock: WorkClock, repeat: int) -> Calibration:
    from dslc.build import load_text

    kink = Kink("min", 16)
    pipeline = load_text(formula_text(kink), "timed.wf")["kinked"]
    pipe = Kinked(kink)
    pipe.transformer = Attending(clock)
    session = Session(pipe, pipeline, "cpu", clock=clock)  # type: ignore[arg-type]  # a __call__ of its own keywords
    return calibrate_session(
        session, target=TARGET, probe=PROBE, warmup=WARMUP, verify=True, repeat=repeat
    )


def time_kinds(cal: Calibration) -> set[FindingKind]:
    return {f.kind for f in cal.findings if f.quantity == Quantity.TIME}


@pytest.mark.parametrize("burst", [False, True], ids=["steady", "one-burst-a-size"])
def test_a_wrong_time_term_on_clean_replicated_evidence_is_a_formula_mismatch(burst):
    cal = calibrate(WorkClock(burst), repeat=3)
    found = [f for f in cal.findings if f.quantity == Quantity.TIME]
    mismatch = [f for f in found if f.kind == FindingKind.FORMULA_MISMATCH]
    assert [f.stage for f in mismatch] == ["DenoisingStage"], found
    assert mismatch[0].actionable and mismatch[0].direction
    assert "formula-mismatch on DenoisingStage time" in verdict(cal).findings


@pytest.mark.parametrize(
    ("disagree", "repeat", "why"),
    [(True, 3, "the runs spread"), (False, 2, "timed in 2 runs")],
    ids=["runs-that-disagree", "two-runs"],
)
def test_the_same_miss_on_unclean_evidence_is_a_time_unknown_note(disagree, repeat, why):
    cal = calibrate(WorkClock(disagree=disagree), repeat=repeat)
    kinds = time_kinds(cal)
    assert kinds == {FindingKind.TIME_UNKNOWN}, [f.message for f in cal.findings]
    note = next(f for f in cal.findings if f.kind == FindingKind.TIME_UNKNOWN)
    assert why in note.message and "none needed" in note.next_step
    assert FindingKind.TIME_UNKNOWN in NOTES and FindingKind.TIME_UNKNOWN not in ACTIONABLE
    judged = verdict(cal, strict=True)
    assert "DenoisingStage time" not in judged.findings  # not an alarm, never fails the verdict
    assert not any(f.quantity == Quantity.TIME for f in cal.findings if f.actionable)
