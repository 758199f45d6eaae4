"""The lifecycle fuzzer's hang guard (``calibration.fuzzing.lifecycle_guard``) tells a hang from
a loaded machine by progress, on a steady clock: a rank that keeps beating is never a hang however
long its case runs (below the livelock cap), a rank silent past the guard is one, a fresh
process's first beat may take ``START_S``; every counter read beats; any finding fails the run."""

from __future__ import annotations

from calibration.fuzzing import lifecycle_guard as guard
from calibration.fuzzing.lifecycle_beating import Beating
from runtime.measure.backends import LiveTensorBackend

SILENCE_S = guard.silence_s(20.0)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _watch(fresh: bool = False, ranks: int = 1) -> tuple[guard.Watch, Clock]:
    clock = Clock()
    return guard.Watch(SILENCE_S, [0] * ranks, [fresh] * ranks, clock), clock


def test_a_slow_rank_that_keeps_progressing_is_no_hang():
    watch, clock = _watch()
    for beat in range(1, 100):  # 990 s in all, four times the old fixed guard: a loaded machine
        clock.now += 10.0
        assert watch.hung([beat]) == ""


def test_a_rank_silent_past_the_guard_hangs_and_is_named():
    watch, clock = _watch(ranks=2)
    clock.now = 50.0
    assert watch.hung([1, 1]) == ""
    clock.now = 50.0 + SILENCE_S  # rank 0 silent since 50 s, rank 1 beats on
    assert watch.hung([1, 2]) == ""
    clock.now += 1.0
    assert watch.hung([1, 3]).startswith("rank 0 made no progress")


def test_a_rank_that_ended_is_silent_by_right():
    watch, clock = _watch(ranks=2)
    clock.now = 10.0
    assert watch.hung([1, 1]) == ""
    clock.now += 3 * SILENCE_S  # rank 0 ended; rank 1 beats on
    assert watch.hung([None, 2]) == ""


def test_a_fresh_process_has_start_s_for_its_first_beat_only():
    watch, clock = _watch(fresh=True)
    clock.now = guard.START_S - 1.0  # imports on a loaded machine
    assert watch.hung([0]) == ""
    assert watch.hung([1]) == ""  # the first beat: from now on the silence guard
    clock.now += SILENCE_S + 1.0
    assert "no progress" in watch.hung([1])
    late, clock = _watch(fresh=True)
    clock.now = guard.START_S + 1.0
    assert "no progress" in late.hung([0])


def test_a_case_that_beats_forever_is_capped():
    watch, clock = _watch()
    beat = 0
    while not watch.hung([beat]):
        beat += 1
        clock.now += 5.0
    assert clock.now > guard.CAP_S and "livelock" in watch.hung([beat])


def test_every_counter_read_beats():
    shared = type("Count", (), {"value": 0})()
    backend = Beating(LiveTensorBackend(), guard.beater(shared))
    with backend.tracking():
        backend.current_allocated()
        backend.peak_allocated()
    assert shared.value == 3


def test_any_finding_makes_the_verdict_non_zero():
    assert guard.verdict({"apply": {"cases": 4}, "undo": {"cases": 1}}) == 0
    for finding in guard.FINDINGS:
        assert guard.verdict({"apply": {"cases": 4}, "undo": {"cases": 1, finding: 1}}) == 1


def test_an_overrun_is_replayed_by_its_own_command():
    assert guard.replay(1, 88).endswith("bench/lifecycle_fuzz.py --seed 1 --first 88 --cases 1")
