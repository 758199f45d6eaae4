"""Request and stage time, computed by hand (toy pipeline: DenoisingStage iterations = steps, time ~
size; DecodingStage time ~ size; TextEncodingStage time ~ 1; the target: steps 10, size 100).
"""

from __future__ import annotations

import pytest

from runtime.estimate import estimate, estimate_timing
from runtime.record import StageIterations
from tests.runtime.estimate.conftest import record, stage, steps


def timed(
    size: int,
    denoise: list[float],
    denoise_total: float,
    *,
    decode: float = 0.5,
    text: float = 0.05,
    duration: float = 2.0,
    n: int | None = None,
):
    n = len(denoise) if n is None else n
    return record(
        {"size": size, "steps": n},
        phases=[
            stage("TextEncodingStage", 1, text),
            stage("DenoisingStage", 1, denoise_total),
            stage("DecodingStage", 1, decode),
        ],
        iterations=steps("DenoisingStage", denoise),
        duration=duration,
        stage_iterations=[StageIterations("DenoisingStage", n, 10, "counted")],
    )


def test_one_record_scales_by_the_time_measure_ratio(toy):
    # DenoisingStage: median of the steady iterations [0.2, 0.25, 0.15] (the first dropped) = 0.2;
    # outside iterations 1.0 - 0.9 = 0.1; at size 100 (x 100/50), 10 iterations: 0.1 + 0.2 * 2 * 10
    # = 4.1. DecodingStage (one-shot): 0.5 x 2 = 1.0. TextEncodingStage: measure 1, 1 iteration =
    # the target's -> measured 0.05. Untracked: 2.0 - 1.55 = 0.45, kept. Request: 4.1 + 1.0 + 0.05 +
    # 0.45 = 5.6.
    timing = estimate_timing([timed(50, [0.3, 0.2, 0.25, 0.15], 1.0)], toy)
    assert timing.seconds == pytest.approx(5.6)
    assert timing.untracked_s == pytest.approx(0.45)
    denoise = timing.stage("DenoisingStage")
    assert (
        denoise.method,
        denoise.repeated,
        denoise.measured_iterations,
        denoise.target_iterations,
    ) == ("scaled", True, 4, 10)
    assert (denoise.seconds, denoise.fixed_s, denoise.per_iteration_s) == pytest.approx(
        (4.1, 0.1, 0.4)
    )
    decode = timing.stage("DecodingStage")
    assert (decode.method, decode.repeated, decode.seconds) == ("scaled", False, pytest.approx(1.0))
    text = timing.stage("TextEncodingStage")
    assert (text.method, text.seconds) == ("measurement", pytest.approx(0.05))
    assert timing.method == "scaled"


def test_a_single_iteration_is_its_own_median(toy):
    # one iteration of 0.3 in a 0.4 s stage at size 50: 0.1 + 0.3 * 2 * 10 = 6.1.
    timing = estimate_timing([timed(50, [0.3], 0.4)], toy)
    assert timing.stage("DenoisingStage").seconds == pytest.approx(6.1)


def test_two_sizes_fit_the_per_iteration_time(toy):
    # steady medians: size 10 -> 0.1, size 20 -> 0.15: 0.05 + 0.005 * size, at 100: 0.55 per
    # iteration. The representative record (most work: size 20) keeps 0.55 - 0.5 = 0.05 s outside
    # its iterations: 0.05 + 0.55 * 10 = 5.55. Decoding: 0.5 s at 10 and 0.7 s at 20 -> 0.3 + 0.02 *
    # size -> 2.3 at 100.
    records = [timed(10, [0.4, 0.1, 0.1], 0.65), timed(20, [0.2, 0.15, 0.15], 0.55, decode=0.7)]
    timing = estimate_timing(records, toy)
    denoise = timing.stage("DenoisingStage")
    assert (denoise.method, denoise.seconds, denoise.per_iteration_s) == (
        "fit",
        pytest.approx(5.55),
        pytest.approx(0.55),
    )
    assert timing.stage("DecodingStage").seconds == pytest.approx(2.3)
    assert timing.method == "fit"


def test_three_sizes_fit_the_per_iteration_time_by_weighted_least_squares(toy):
    # steady medians: size 10 -> 0.1, 20 -> 0.16, 30 -> 0.19, one run each (default noise 5 %).
    # Each median's variance is (1.2533 x 5 % x median)² plus the model error (0.1 x ln(100 / size)
    # x median)²: weights 1756.05, 1309.51, 1503.65. Weighted means: size 19.586 and 0.14744;
    # slope Σw(x-x̄)(y-ȳ) / Σw(x-x̄)² = 0.0045334, constant 0.058649: 0.51199 per iteration at
    # 100. (Without the model error: 0.5307; unweighted: 0.51; the two largest alone: 0.37.) The
    # representative (size 30) keeps 0.6 - 0.57 = 0.03 s outside iterations: 0.03 + 5.1199 = 5.1499.
    records = [
        timed(10, [0.4, 0.1, 0.1], 0.65),
        timed(20, [0.3, 0.16, 0.16], 0.7),
        timed(30, [0.19, 0.19, 0.19], 0.6),
    ]
    denoise = estimate_timing(records, toy).stage("DenoisingStage")
    assert (denoise.method, denoise.seconds, denoise.per_iteration_s) == (
        "fit",
        pytest.approx(5.149918),
        pytest.approx(0.5119918),
    )
    assert "least squares) on measures 10, 20, 30" in denoise.reason


def test_a_negative_time_slope_is_taken_as_flat(toy):
    # size 10 -> 0.2, size 20 -> 0.15: the larger size's 0.15 per iteration: 0.05 + 1.5 = 1.55.
    records = [timed(10, [0.4, 0.2, 0.2], 0.85), timed(20, [0.2, 0.15, 0.15], 0.55)]
    denoise = estimate_timing(records, toy).stage("DenoisingStage")
    assert (denoise.seconds, denoise.per_iteration_s) == pytest.approx((1.55, 0.15))
    assert "negative slope" in denoise.reason


def test_repeated_runs_of_one_size_count_by_their_median(toy):
    # size 20 measured at 0.3, 0.15 and 0.15 per iteration: the median 0.15 counts, as in the fit
    # above (5.55); one slow run on a loaded machine does not move it.
    records = [
        timed(10, [0.4, 0.1, 0.1], 0.65),
        timed(20, [0.5, 0.3, 0.3], 1.15),
        timed(20, [0.2, 0.15, 0.15], 0.55),
        timed(20, [0.2, 0.15, 0.15], 0.55),
    ]
    assert estimate_timing(records, toy).stage("DenoisingStage").seconds == pytest.approx(5.55)


def test_a_run_at_the_target_is_a_measurement(toy):
    at_target = timed(100, [0.1] * 10, 1.25, decode=0.8, text=0.05, duration=2.3)
    timing = estimate_timing([timed(20, [0.2, 0.15, 0.15], 0.55), at_target], toy)
    assert [(s.stage, s.method) for s in timing.stages] == [
        ("TextEncodingStage", "measurement"),
        ("DenoisingStage", "measurement"),
        ("DecodingStage", "measurement"),
    ]
    # 0.05 + 1.25 + 0.8 + (2.3 - 2.1) untracked = 2.3
    assert timing.seconds == pytest.approx(2.3) and timing.method == "measurement"


def test_runs_at_the_target_count_by_their_median(toy):
    # three target-size runs decode in 0.8, 0.6 and 1.4 s: the median 0.8 counts, not the fastest
    runs = [
        timed(100, [0.1] * 10, 1.25, decode=d, text=0.05, duration=2.3) for d in (0.8, 0.6, 1.4)
    ]
    timing = estimate_timing(runs, toy)
    assert timing.stage("DecodingStage").seconds == pytest.approx(0.8)


def test_any_admissible_target(toy):
    # the one-record case at steps 4, size 25: 0.1 + 0.2 * (25/50) * 4 = 0.5; decode 0.25; text
    # 0.05; untracked 0.45: 1.25.
    timing = estimate(
        [timed(50, [0.3, 0.2, 0.25, 0.15], 1.0)], toy, target={"steps": 4, "size": 25}
    ).timing
    assert timing.seconds == pytest.approx(1.25)


def test_no_time_without_a_successful_record_or_a_measured_stage(toy):
    timing = estimate_timing([record({"size": 20}, error="out of memory")], toy)
    assert (timing.method, timing.seconds) == ("none", None)
    partial = record(
        {"size": 50},
        phases=[stage("DenoisingStage", 1, 1.0)],
        duration=1.0,
        iterations=steps("DenoisingStage", [0.3, 0.2]),
    )
    timing = estimate_timing([partial], toy)
    assert (timing.method, timing.seconds) == ("none", None)
    assert "TextEncodingStage" in timing.reason and "DecodingStage" in timing.reason
    assert timing.stage("DenoisingStage").seconds == pytest.approx(
        0.5 + 0.2 * 2 * 10
    )  # 1.0 - 0.5 outside
