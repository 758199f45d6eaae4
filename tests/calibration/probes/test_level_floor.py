"""Where a weights level's floor sets a phase's bound, the loop reads it at a size nearer the target
(``calibration.probes.level_floor``): which phases it is, and which sizes are nearer."""

from __future__ import annotations

from pathlib import Path

import pytest
from attrs import evolve

from calibration.calibrate.run import load_pipeline
from calibration.probes.level_floor import floored, nearer_sizes, nearness
from calibration.probes.policy import memory_terms, work
from runtime import Pipeline
from runtime.estimate import PhaseEstimate, estimate_phase_peaks
from runtime.record import Phase
from tests.runtime.estimate.conftest import TOY, record, stage

CUSTOM_SD = Path(__file__).resolve().parents[1] / "data" / "custom_sd.wf"
DENOISE = "DenoisingStage"
SMALL, BIG = 100, 1000


def _phase(size: int, big: int) -> Phase:
    """test_level_bounds' toy phase: the small group holds its own activations, 100 + 30 x size."""
    levels = ((SMALL, 100 + 30 * size), (BIG, big))
    held = stage(DENOISE, BIG + big, active=["transformer"])
    own = max(a for _, a in levels)
    return evolve(held, weights_bytes=BIG, activations_bytes=own, weight_levels=levels)


@pytest.fixture(scope="module")
def toy() -> Pipeline:
    from dslc.build import load_text

    return load_text(TOY, "toy.wf")["toy"]


def _phases(toy: Pipeline, bigs: dict[int, int]) -> tuple[PhaseEstimate, ...]:
    records = [
        record({"size": s}, phases=[_phase(s, b)], peak=BIG + b) for s, b in sorted(bigs.items())
    ]
    return estimate_phase_peaks(records, toy, component_weight_bytes={"transformer": 10**6})


def test_a_phase_is_floored_where_the_floor_lifts_it_past_its_own_padding(toy):
    # test_level_bounds: the big level's padded fit 3,450 lifted to 4,450, past the 250 B its
    # margin padded the raw 3,200; a level that is the phase's own activations is never lifted
    assert floored(_phases(toy, {10: 250, 20: 450})) == (DENOISE,)
    assert floored(_phases(toy, {10: 500, 20: 900})) == ()


def test_a_lift_within_the_fits_own_padding_is_left_to_the_margin(toy):
    # bound 4,450 over raw 3,200: a lift of L leaves the fit's own padding 1,250 - L; floored
    # only where L passes it (625 does not, 626 does)
    (phase,) = _phases(toy, {10: 250, 20: 450})
    assert (phase.peak.raw_bytes, phase.peak.bound_bytes) == (3200, 4450)

    def lifted(lift: int) -> list[PhaseEstimate]:
        return [evolve(phase, peak=evolve(phase.peak, lift_bytes=lift))]

    assert floored(lifted(625)) == ()
    assert floored(lifted(626)) == (DENOISE,)


PROBE = {"steps": 2, "height": 64, "width": 64, "cfg": True}
TARGET = {"steps": 2, "height": 128, "width": 128, "cfg": True}


def test_nearer_sizes_lie_nearer_than_every_measured_one_and_never_past_the_target():
    pipeline = load_pipeline(CUSTOM_SD, "custom_sd")
    steps_one = {**PROBE, "steps": 1, "width": 128}
    measured = [PROBE, steps_one]
    runs = [record(m, defaults={}, pipeline="custom_sd") for m in measured]
    sizes = nearer_sizes(pipeline, [DENOISE], runs, measured, PROBE, TARGET)
    assert sizes
    now = max(nearness(pipeline, [DENOISE], m, TARGET) for m in measured)
    want = memory_terms(pipeline, DENOISE, TARGET)
    for size in sizes:
        assert nearness(pipeline, [DENOISE], size, TARGET) > now
        assert work(pipeline, size) < work(pipeline, TARGET)
        assert not all(h >= w for h, w in zip(memory_terms(pipeline, DENOISE, size), want))
        assert size not in measured
    near = [nearness(pipeline, [DENOISE], s, TARGET) for s in sizes]
    assert near == sorted(near, reverse=True)  # the nearest first
    # the UNet's memory does not read the steps: each size also at the fewest steps measured, the
    # cheaper of equals first
    assert sizes[0]["steps"] == 1 and {**sizes[0], "steps": 2} in sizes


def test_no_stage_floored_no_size():
    pipeline = load_pipeline(CUSTOM_SD, "custom_sd")
    assert (
        nearer_sizes(
            pipeline, [], [record(PROBE, defaults={}, pipeline="custom_sd")], [PROBE], PROBE, TARGET
        )
        == []
    )
