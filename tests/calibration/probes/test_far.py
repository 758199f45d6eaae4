"""A target far beyond the measured sizes along one axis (calibration.probes.far): measured there by
the loop, or named by a ``far-axis`` finding. The issue's case: a chunked decode declared as
``memory ~ frames * height * width`` (no chunk), a target of 24 frames from sizes of at most 20."""

from __future__ import annotations

from calibration.calibrate.loop import BUDGET
from calibration.calibrate.run import Calibration, calibrate_session
from calibration.core.session import Session
from calibration.probes.far import FAR, at_axis, far_axes, far_findings
from calibration.probes.finding import NOTES
from calibration.probes.findings import check
from runtime.kinds import FindingKind, Quantity
from tests.calibration.probes.kinked import Kink, Kinked, formula_text

CHUNK = Kink("min", 20)  # the decoder's working set stops growing at 20 frames
TARGET = {"steps": 2, "frames": 24, "height": 96, "width": 96}
PROBE = {"steps": 1, "frames": 20, "height": 32, "width": 32}
WARMUP = {"steps": 1, "frames": 8, "height": 16, "width": 16}
FARTHER = {**TARGET, "frames": 32}  # 1.6x the probe's 20 frames: far (FAR)


def no_chunk():
    """The formulas with the decode's chunk left out: `memory ~ frames * height * width`."""
    from dslc.build import load_text

    text = formula_text(CHUNK).replace(
        f"memory ~ [1 * {CHUNK.text}, 1 * frames * height * width]",
        "memory ~ frames * height * width",
    )
    assert "min(" not in text
    return load_text(text, "no_chunk.wf")["kinked"]


def calibrate() -> Calibration:
    session = Session(Kinked(CHUNK), no_chunk(), "cpu")  # type: ignore[arg-type]  # its own __call__
    return calibrate_session(
        session, target=TARGET, probe=PROBE, warmup=WARMUP, verify=True, repeat=1
    )


def test_far_axes_are_the_params_memory_grows_in_past_far_times_every_size():
    pipeline = no_chunk()
    measured = [WARMUP, PROBE]
    axes = {a.name: a for a in far_axes(pipeline, measured, FARTHER)}
    assert axes["frames"].largest == 20 and axes["frames"].goal == 32
    assert set(axes["frames"].stages) == {"DenoisingStage", "DecodingStage"}
    assert axes["height"].distance == 3.0
    assert "steps" not in axes  # no stage's memory grows with steps: 2x is not far
    assert "frames" not in {a.name for a in far_axes(pipeline, measured, TARGET)}  # 1.2x
    nearer = {**PROBE, "frames": 22, "height": 96, "width": 96}
    assert 32 <= FAR * 22 and not far_axes(pipeline, [*measured, nearer], FARTHER)


def test_the_far_size_is_the_cheapest_measured_one_moved_to_the_targets_value():
    pipeline = no_chunk()
    axis = next(a for a in far_axes(pipeline, [WARMUP, PROBE], FARTHER) if a.name == "frames")
    sizes = at_axis(pipeline, [PROBE, WARMUP], axis, FARTHER)
    assert sizes[0] == {**WARMUP, "frames": 32}
    assert {**PROBE, "frames": 32} in sizes


def test_the_no_chunk_decode_is_measured_at_24_frames_and_named():
    cal = calibrate()
    assert any(r.params["frames"] == 24 for r in cal.records)  # measured at the target's value
    assert cal.extra_cost < BUDGET
    decode = [f for f in cal.findings if f.stage == "DecodingStage" and f.quantity == "memory"]
    assert any(f.actionable for f in decode), [f.message for f in cal.findings]
    for c in cal.phases():
        assert c.bound is not None and c.measured is not None and c.bound >= c.measured, c


def test_a_far_axis_no_size_was_afforded_at_is_named_with_its_distance_and_risk():
    # The same records without any size past 20 frames, and a target of 32: what the loop names
    # when no size at 32 frames fits the budget.
    cal = calibrate()
    pipeline = no_chunk()
    records = [r for r in cal.records if int(r.params["frames"]) <= 20]
    measured = [dict(r.params) for r in records]
    axes = [a for a in far_axes(pipeline, measured, FARTHER) if a.name == "frames"]
    assert axes and axes[0].largest == 20
    fits = check(pipeline, records, FARTHER, "cpu", (Quantity.MEMORY,)).fits
    found = {f.stage: f for f in far_findings(pipeline, axes, fits, FARTHER)}
    decode = found["DecodingStage"]
    assert decode.kind == FindingKind.FAR_AXIS and not decode.actionable  # named: a note
    assert decode.kind in NOTES
    assert decode.direction == "frames" and decode.risk > 0 and 0 < decode.share < 1
    assert "frames=32" in decode.message and "1.6x" in decode.message
    assert "frames=20" in decode.message and "frames=32" in decode.next_step
