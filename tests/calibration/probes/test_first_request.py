"""The checks never fit the session's first request (it pays one-time costs). When the sizes
outside the formula's regime are left out -- the warmup's among them -- the next record must not
take its place: a probe measured once so far (``repeat=1``, or the first round) stays in the fit.

Before the fix the probe was dropped with the warmup, the decode looked not estimable, and its
"conservative" bound came out 18 % under the memory the target needs."""

from __future__ import annotations

from calibration.calibrate.run import calibrate_session
from calibration.core.session import Session
from tests.calibration.probes.kinked import Kink, Kinked, formula_text

TARGET = {"steps": 2, "frames": 32, "height": 96, "width": 96}
PROBE = {"steps": 1, "frames": 16, "height": 32, "width": 32}
WARMUP = {"steps": 1, "frames": 4, "height": 16, "width": 16}


def test_a_probe_measured_once_stays_in_the_fit_when_the_warmup_is_left_out():
    from dslc.build import load_text

    floor = Kink("max", 8)  # the decode holds at least 8 frames' worth: the warmup's 4 sit below
    text = formula_text(floor, (1, 0))
    declared = "memory ~ [1 * max(frames, 8) * height * width, 0 * frames * height * width]"
    assert declared in text
    pipeline = load_text(text.replace(declared, "memory ~ frames * height * width"), "floor.wf")
    session = Session(Kinked(floor, (1, 0)), pipeline["kinked"], "cpu")
    cal = calibrate_session(session, target=TARGET, probe=PROBE, warmup=WARMUP, repeat=1)
    needed = floor.value(TARGET)  # the bytes the decode allocates at the target
    decode = next(p for p in cal.estimate.phases if p.label == "stage:DecodingStage")
    assert decode.peak.bound_bytes is not None and decode.peak.bound_bytes >= needed
    assert abs(decode.peak.raw_bytes / needed - 1) < 0.01
    assert not any(f.kind == "not-estimable" for f in cal.findings)
