"""Phase peaks of a memory measure with several terms: every rule with numbers computed by hand.

The pipeline `video` below decodes with `memory ~ [area, frames * area]` (a working set per pixel
plus the accumulated output). Its true peak, for the records built here, is
``1000 + 20 x area + 5 x frames x area`` bytes; the default workload (the target) is area 400,
frames 9, i.e. terms (400, 3600) and a true peak of 1000 + 8000 + 18000 = 27000 B.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from runtime import Pipeline
from runtime.estimate import PlaneFit, estimate, estimate_phase_peaks
from runtime.estimate.fit.exact import basic_solution, estimable, independent_rows, row
from tests.runtime.estimate.conftest import record, stage

VIDEO = """
pipeline video {
    param area: int = 400 in [1, 100000]
    param frames: int = 9 in [1, 1000]
    stage DecodingStage { memory ~ [area, frames * area] }
}
"""
DECODE = "stage:DecodingStage"


@pytest.fixture(scope="module")
def video() -> Pipeline:
    from dslc.build import load_text

    return load_text(VIDEO, "video.wf")["video"]


def true_peak(area: int, frames: int) -> int:
    return 1000 + 20 * area + 5 * frames * area


def at(area: int, frames: int, peak: int | None = None):
    """A record of one decoding at (area, frames), its peak the true one unless given."""
    value = true_peak(area, frames) if peak is None else peak
    return record(
        {"area": area, "frames": frames},
        phases=[stage("DecodingStage", value)],
        baseline=1000,
        pipeline="video",
        defaults={},
    )


def decode(records, video, **kwargs):
    return {p.label: p.peak for p in estimate_phase_peaks(records, video, **kwargs)}[DECODE]


def test_the_loader_gives_the_terms(video):
    assert video.memory_terms("DecodingStage") == (400, 3600)
    assert video.memory("DecodingStage") == 4000


def test_three_sizes_in_general_position_fit_the_plane_exactly(video):
    # (100, 300) -> 4500, (200, 600) -> 8000, (100, 500) -> 5500 determine c=1000, s=(20, 5):
    # raw 1000 + 20*400 + 5*3600 = 27000; bound 1000 + 1.2 * 26000 = 32200.
    peak = decode([at(100, 3), at(200, 3), at(100, 5)], video)
    assert (peak.method, peak.raw_bytes, peak.bound_bytes, peak.margin) == (
        "fit",
        27000,
        32200,
        1.2,
    )
    assert peak.fit == PlaneFit(Fraction(1000), (Fraction(20), Fraction(5)), peak.fit.terms)
    assert set(peak.fit.terms) == {(100, 300), (200, 600), (100, 500)}
    assert peak.target_terms == (400, 3600) and peak.target_measure == 4000
    assert peak.raw_bytes == true_peak(400, 9)


def test_sizes_that_never_vary_frames_still_predict_a_target_at_their_frames(video):
    # Both sizes have frames 3, so the frames term is not determined; the target at frames 3,
    # terms (400, 1200), is their combination -2 x (100, 300) + 3 x (200, 600): estimable.
    # Basic solution: the frames slope 0, c + 100 s = 4500, c + 200 s = 8000 -> s = 35, c = 1000.
    # raw 1000 + 35*400 = 15000 (the true peak); bound 1000 + 1.2 * 14000 = 17800.
    peak = decode([at(100, 3), at(200, 3)], video, target={"frames": 3})
    assert (peak.method, peak.raw_bytes, peak.bound_bytes) == ("fit", 15000, 17800)
    assert peak.raw_bytes == true_peak(400, 3)
    assert peak.fit.slopes == (35, 0) and peak.fit.constant == 1000
    assert "ride in the constant" in peak.reason


def test_a_target_the_sizes_do_not_determine_is_scaled_by_the_largest_term_ratio(video):
    # frames 9 is not reachable from sizes at frames 3: fall back to scaling one size by its
    # largest term ratio. (100, 300): max(400/100, 3600/300) = 12, (4500 - 1000) * 12 = 42000;
    # (200, 600): max(2, 6) = 6, (8000 - 1000) * 6 = 42000. raw 43000, bound 1000 + 50400 = 51400:
    # above the true 27000, as a bound must be.
    peak = decode([at(100, 3), at(200, 3)], video)
    assert (peak.method, peak.raw_bytes, peak.bound_bytes) == ("scaled", 43000, 51400)
    assert "do not determine the memory terms at the target" in peak.reason
    assert "largest term ratio (12, term 2)" in peak.reason
    assert peak.bound_bytes >= true_peak(400, 9)


def test_a_measurement_covers_the_target_only_when_every_term_does(video):
    # (500, 4500) covers (400, 3600); (500, 3000) does not (3000 < 3600) and is not chosen even
    # though it is smaller.
    covered = decode([at(500, 9, peak=41000), at(500, 6, peak=30000)], video)
    assert (covered.method, covered.raw_bytes, covered.bound_bytes) == ("measurement", 41000, 41000)
    assert "[500, 4500] >= target [400, 3600]" in covered.reason


def test_a_negative_slope_in_the_plane_is_noise(video):
    # Frames 5 measured lower than frames 3 at the same area: slope of the frames term
    # (4000 - 4500) / 200 < 0. Fall back to scaling; the largest bound of the three sizes wins:
    # (100, 300): 3500 x 12 = 42000; (200, 600): 7000 x 6 = 42000; (100, 500): 3000 x 7.2 = 21600.
    peak = decode([at(100, 3), at(200, 3), at(100, 5, peak=4000)], video)
    assert (peak.method, peak.raw_bytes) == ("scaled", 43000)
    assert "negative slope (noise)" in peak.reason


def test_a_negative_slope_worth_a_few_bytes_leaves_its_term_out(video):
    # Frames 5 measured 1 B under frames 3 at the same area (a scheduler's arrays decide such
    # bytes): the frames slope is -1/200 B, 18 B at the target, under 1 % of the plane there. The
    # term is left out and the area term fitted through (200, 600) -> 8000 and (100, 500) -> 4499:
    # 35.01 B a unit, constant 998: 998 + 35.01 x 400 = 15002.
    peak = decode([at(100, 3), at(200, 3), at(100, 5, peak=4499)], video)
    assert (peak.method, peak.raw_bytes) == ("fit", 15002)
    assert peak.fit.slopes[1] == 0
    assert "term 2 fitted a negative slope, noise: left out" in peak.reason


def test_the_request_peak_uses_the_terms_too(video):
    records = [at(100, 3), at(200, 3), at(100, 5)]
    result = estimate(records, video)
    assert (result.request_peak.method, result.request_peak.raw_bytes) == ("fit", 27000)


def test_a_failed_probe_blocks_only_when_every_term_is_at_or_below_the_target(video):
    failed_below = record(
        {"area": 400, "frames": 3}, error="OOM", pipeline="video", defaults={}, baseline=1000
    )
    failed_mixed = record(
        {"area": 800, "frames": 3}, error="OOM", pipeline="video", defaults={}, baseline=1000
    )
    # (800, 2400) is above the target in its first term: it says nothing about the target.
    ok = [at(100, 3), at(200, 3), at(100, 5)]
    assert decode([*ok, failed_mixed], video).method == "fit"
    assert decode([*ok, failed_below], video).method == "none"


# --- the exact linear algebra underneath ----------------------------------------------------------


def test_independent_rows_keep_the_order_and_skip_dependent_rows():
    rows = [row((100, 300)), row((200, 600)), row((300, 900)), row((100, 500)), row((7, 7))]
    # (300, 900) = -1 x (100, 300) + 2 x (200, 600); three rows fill a 3-wide design.
    assert independent_rows(rows) == [0, 1, 3]


def test_estimable_is_membership_in_the_span():
    rows = [row((100, 300)), row((200, 600))]
    assert estimable(rows, row((400, 1200)))
    assert not estimable(rows, row((400, 3600)))


def test_basic_solution_solves_exactly_and_zeroes_undetermined_columns():
    assert basic_solution([row((100, 300)), row((200, 600))], [Fraction(4500), Fraction(8000)]) == (
        1000,
        35,
        0,
    )
    assert basic_solution(
        [row((1, 3)), row((2, 3)), row((1, 5))], [Fraction(1035), Fraction(1055), Fraction(1045)]
    ) == (1000, 20, 5)
    with pytest.raises(ValueError):
        basic_solution([row((1, 3)), row((2, 6)), row((3, 9))], [Fraction(0)] * 3)
