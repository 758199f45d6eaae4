"""Per-iteration growth (a KV cache): extrapolated to the target's last iteration, by hand."""

from __future__ import annotations

from fractions import Fraction

from runtime.estimate import estimate, estimate_iteration_growth
from tests.runtime.estimate.conftest import phase, record, stage, steps


def growing(peaks, *, stage_peak=450, size=100):
    return record(
        {"steps": len(peaks), "size": size},
        phases=[
            stage("DenoisingStage", stage_peak),
            phase("setup", "DenoisingStage", "DenoisingStage", 300),
        ],
        iterations=steps("DenoisingStage", peaks=peaks),
        peak=stage_peak,
    )


def test_growing_iterations_are_extrapolated_to_the_last_target_iteration(toy):
    # steady iterations (index 1..3) peak 200, 300, 400: 100 B per iteration; the target runs 10
    # iterations, the last is index 9: 400 + 100 * (9 - 3) = 1000, i.e. 600 B more than measured.
    (g,) = estimate_iteration_growth([growing([100, 200, 300, 400])], toy)
    assert (g.stage, g.bytes_per_iteration, g.measured_last_index, g.target_last_index) == (
        "DenoisingStage",
        100,
        3,
        9,
    )
    assert (g.extrapolated_peak_bytes, g.growth_bytes) == (1000, 600)


def test_growth_raises_the_phases_that_span_it(toy):
    # The stage phase (450 >= the last iteration's 400) carries the 600 B: measured at the target's
    # size, so raw 450 + 600 = 1050 and bound 450 + 600 * 1.2 = 1170. The setup phase (300 < 400)
    # does not.
    result = estimate([growing([100, 200, 300, 400])], toy)
    peak = result.phase("stage:DenoisingStage").peak
    assert (peak.method, peak.raw_bytes, peak.bound_bytes, peak.margin) == (
        "measurement",
        1050,
        1170,
        1.2,
    )
    assert "per-iteration growth" in peak.reason
    assert result.phase("setup:DenoisingStage@DenoisingStage").peak.raw_bytes == 300
    assert (result.request_peak.raw_bytes, result.request_peak.bound_bytes) == (1050, 1170)


def test_a_staircase_grows_by_its_mean_step(toy):
    # 200, 200, 300, 300 over indices 1..4: (300 - 200) / 3 per iteration; to index 9:
    # 300 + 100/3 * 5 = 466.67 -> 467.
    (g,) = estimate_iteration_growth([growing([100, 200, 200, 300, 300])], toy)
    assert g.bytes_per_iteration == Fraction(100, 3) and g.extrapolated_peak_bytes == 467


def test_flat_falling_short_or_complete_runs_do_not_grow(toy):
    cases = [
        [
            100,
            400,
            400,
            400,
        ],  # only the first iteration is lower: it allocates what the others reuse
        [100, 300, 200, 400],  # not monotone
        [100, 400],  # one steady iteration says nothing about growth
        [
            100,
            200,
            300,
            400,
            500,
            600,
            700,
            800,
            900,
            1000,
        ],  # already at the target's 10 iterations
    ]
    for peaks in cases:
        assert estimate_iteration_growth([growing(peaks, stage_peak=max(peaks))], toy) == ()


def test_a_scheduler_history_that_fills_and_stays_is_not_growth(toy):
    # DPM-Solver keeps two model outputs: the peak rises over the first steps, then stays. A rise
    # confined to the first half of the steady iterations is not extrapolated to the target.
    assert estimate_iteration_growth([growing([100, 200, 300, 300, 300])], toy) == ()
    # Two steady iterations cannot tell a filling history from a growing cache: no growth.
    assert estimate_iteration_growth([growing([100, 200, 300])], toy) == ()
    # A cache that keeps growing still is.
    (g,) = estimate_iteration_growth([growing([100, 200, 300, 400])], toy)
    assert g.bytes_per_iteration == 100
