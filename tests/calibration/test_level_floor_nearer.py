"""Under group offload a weights level's bound is floored at the phase's own activations' bound less
the gap between the two at the size nearest the target (``level_peaks._covered``); the tiny SD's
UNet level grows slower than the phase's activations, so a gap read at half the target's area left
its bound +14.12 % over the measured peak (raw -1.90 %). The loop now measures a size nearer the
target there (``calibration.calibrate.loop._near_level``): the bound falls under +5 %, still over
the measured peak."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.run import Calibration, load_pipeline
from calibration.core.offload import Offload
from calibration.core.shapes import Shapes
from calibration.examples import tiny_sd

pytest.importorskip("accelerate")

FORMULAS = Path(__file__).resolve().parent / "data" / "custom_sd.wf"
WARMUP = {"steps": 1, "height": 64, "width": 64}
PROBE = {"steps": 2, "height": 64, "width": 64}
TARGET = {"steps": 2, "height": 128, "width": 128}
UNET = "component:unet@DenoisingStage"
WHY = "reading a weights level's floor nearer the target"
TIGHT = 3_500_000  # holds 96x96 under group offload (3.07 MB), not 112x128 (4.7 MB predicted)


@functools.cache
def _calibrated(offload: Offload, capacity: int | None, verify: bool = True) -> Calibration:
    return calibrate_pipeline(
        tiny_sd.build,
        load_pipeline(FORMULAS, "custom_sd"),
        Shapes(WARMUP, PROBE, TARGET),
        call_kwargs=tiny_sd.call_kwargs,
        verify=verify,
        repeat=1,
        threads=1,
        time_tolerance=None,
        offload=offload,
        capacity=capacity,
    )


def _unet(cal: Calibration) -> tuple[int, int, int]:
    """The UNet phase at the target: (measured, raw, bound)."""
    assert cal.measured is not None and cal.measured.ok
    (measured,) = [p.peak_allocated for p in cal.measured.phases if p.name == "unet"]
    peak = cal.estimate.phase(UNET).peak
    assert peak.raw_bytes is not None and peak.bound_bytes is not None, peak.reason
    return measured, peak.raw_bytes, peak.bound_bytes


def test_a_floored_level_is_read_nearer_the_target_and_bounds_within_five_percent():
    cal = _calibrated(Offload.GROUP, 256 << 20)
    near = [e for e in cal.extras if e.reason == WHY]
    assert len(near) == 1, cal.extras
    size = dict(near[0].point)
    assert size["height"] * size["width"] > 64 * 128  # nearer than every other size measured
    assert size["height"] * size["width"] < 128 * 128  # never the target's
    measured, _, bound = _unet(cal)
    assert measured <= bound <= 1.05 * measured, (bound, measured)


def test_one_weights_level_adds_no_size():
    cal = _calibrated(Offload.NONE, None)
    assert not [e for e in cal.extras if e.reason == WHY]


def _near(cal: Calibration) -> dict[str, int | bool]:
    (near,) = [dict(e.point) for e in cal.extras if e.reason == WHY]
    return near


def test_under_a_cap_the_nearer_size_is_one_the_cap_holds():
    # the target itself does not fit (its decode: 5.4 MB): no verify; the nearest size the cap
    # holds by the formulas' prediction, nearer than every other size, smaller than uncapped's
    roomy, tight = (
        _near(_calibrated(Offload.GROUP, 256 << 20)),
        _calibrated(Offload.GROUP, TIGHT, False),
    )
    size = _near(tight)
    assert 64 * 128 < size["height"] * size["width"] < roomy["height"] * roomy["width"]
    assert all(r.ok and r.peak_allocated <= TIGHT for r in tight.records)
