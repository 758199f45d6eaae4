"""Estimability through the real calibrate loop (calibration.calibrate.run.calibrate_session): a
pipeline decode memory has a kink (``min``, ``max``, a clamp, an ``if``) anywhere between the probe
and the target either gets a size past the kink and is predicted within 5 % raw, its bound never
under the measured peak, or is reported ``not-estimable`` -- never with an evidence margin."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from calibration.calibrate.run import Calibration, calibrate_session
from calibration.calibrate.verdict import verdict
from calibration.core.session import Session
from runtime.estimate.fit import FindingKind, MarginSource, estimable, row
from tests.calibration.probes.kinked import Kink, Kinked, formula_text


def calibrate(kink: Kink, target: dict, probe: dict, warmup: dict) -> Calibration:
    from dslc.build import load_text

    pipeline = load_text(formula_text(kink), "kinked.wf")["kinked"]
    pipe = Kinked(kink)
    session = Session(pipe, pipeline, "cpu")  # type: ignore[arg-type]  # a __call__ of its own keywords
    return calibrate_session(
        session, target=target, probe=probe, warmup=warmup, verify=True, repeat=1
    )


def not_estimable(cal: Calibration) -> set[str]:
    return {f.stage for f in cal.findings if f.kind == FindingKind.NOT_ESTIMABLE}


def assert_honest(cal: Calibration) -> None:
    """Every phase within 5 % raw with its bound at or above the measured peak, or its stage
    reported not-estimable with the fixed margin; the bound never under the peak either way."""
    unsure = not_estimable(cal)
    stages = {p.label: p.stage for p in cal.estimate.phases}
    for c in cal.phases():
        assert c.bound is not None and c.measured is not None, c
        assert c.bound >= c.measured, c
        if stages[c.label] not in unsure:
            assert c.error is not None and abs(c.error) <= 0.05, c
    for margin in cal.margins:
        if margin.stage in unsure:
            assert margin.source == MarginSource.FIXED, margin
    for f in cal.findings:
        if f.kind == FindingKind.NOT_ESTIMABLE:
            assert f.actionable and f.next_step


def test_the_chunked_decode_gets_a_size_past_the_chunk():
    # memory ~ [min(frames, 16) * height * width, frames * height * width], probes at 4-16 frames,
    # the target at 24 frames and 96x96: the two terms are equal on every probe.
    kink = Kink("min", 16)
    target = {"steps": 2, "frames": 24, "height": 96, "width": 96}
    cal = calibrate(
        kink,
        target,
        probe={"steps": 1, "frames": 16, "height": 32, "width": 32},
        warmup={"steps": 1, "frames": 4, "height": 16, "width": 16},
    )
    assert not not_estimable(cal)
    assert any(p["frames"] > 16 for p in (e.point for e in cal.extras))  # a size past the chunk
    assert_honest(cal)
    decode = next(p for p in cal.estimate.phases if p.label == "stage:DecodingStage")
    assert decode.peak.method == "fit"


def test_a_kink_only_the_target_crosses_is_not_estimable_and_says_so():
    # `if frames > 23`: the only admissible size past it is the target's own frame count, at the
    # target's cost: no size within the budget decides it.
    kink = Kink("if", 23)
    side = {"height": 32, "width": 32}
    cal = calibrate(
        kink,
        target={"steps": 1, "frames": 24, **side},
        probe={"steps": 1, "frames": 16, **side},
        warmup={"steps": 1, "frames": 8, **side},
    )
    assert not_estimable(cal) == {"DecodingStage"}
    assert_honest(cal)
    margins = {m.stage: m for m in cal.margins}
    assert margins["DecodingStage"].source == MarginSource.FIXED
    assert "not-estimable on DecodingStage memory" in verdict(cal).line
    decode = next(p for p in cal.estimate.phases if p.label == "stage:DecodingStage")
    assert decode.peak.method == "scaled"  # the conservative bound


@st.composite
def kinked_cases(draw):
    kind = draw(st.sampled_from(["min", "max", "clamp", "if"]))
    probe_frames = draw(st.integers(4, 16))
    target_frames = draw(st.integers(probe_frames + 2, 40))
    at = draw(st.integers(probe_frames, target_frames - 1))
    warmup_frames = draw(st.integers(1, probe_frames - 1))
    side = draw(st.sampled_from([16, 32]))
    grows = draw(st.booleans())  # the target larger in area too, or the same
    target_side = 64 if grows else side
    return (
        Kink(kind, at, low=min(2, warmup_frames)),
        {"steps": 1, "frames": target_frames, "height": target_side, "width": target_side},
        {"steps": 1, "frames": probe_frames, "height": side, "width": side},
        {"steps": 1, "frames": warmup_frames, "height": 16, "width": 16},
    )


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinked_cases())
def test_a_kink_anywhere_between_probe_and_target_is_predicted_or_reported(case):
    kink, target, probe, warmup = case
    cal = calibrate(kink, target, probe, warmup)
    assert_honest(cal)
    # the finding is exact: reported where, and only where, the sizes leave the target undetermined
    decode_rows = [row([kink.value(r.params), _plain(r.params)]) for r in cal.records if r.ok]
    decided = estimable(decode_rows, row([kink.value(target), _plain(target)]))
    assert ("DecodingStage" in not_estimable(cal)) == (not decided)
    event("not-estimable" if not decided else "estimable")


def _plain(params) -> int:
    return int(params["frames"]) * int(params["height"]) * int(params["width"])
