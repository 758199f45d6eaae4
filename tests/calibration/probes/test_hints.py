"""Next steps that are right (calibration.probes.findings): over formulas that declare any mix of
terms, no hint asks for a term in a direction the stage's declared terms already vary along, and a
residual note says there is nothing to act on. The sizes are measured once, by the real recorder,
on the kinked test pipeline (its memory is exactly ``min(frames, 16) * area + frames * area`` in
the decode, ``frames * area`` a step); each drawn formula is checked against those records."""

from __future__ import annotations

import functools
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibration.core.session import Session
from calibration.probes.findings import NOTES, check
from runtime.kinds import Quantity
from runtime.record import WarmupRecord
from tests.calibration.probes.kinked import Kink, Kinked, formula_text

KINK = Kink("min", 16)
TARGET = {"steps": 2, "frames": 24, "height": 96, "width": 96}
SIZES = [
    {"steps": 1, "frames": f, "height": h, "width": w}
    for f, h, w in ((4, 16, 16), (4, 16, 16), (16, 32, 32), (17, 16, 16), (4, 32, 16))
] + [
    {"steps": 2, "frames": 4, "height": 16, "width": 16},
    {"steps": 1, "frames": 22, "height": 96, "width": 96},
    {"steps": 2, "frames": 8, "height": 48, "width": 48},
]
#: Terms a drawn formula may declare, each with the params it reads.
TERMS = {
    "frames * height * width": {"frames", "height", "width"},
    "height * width": {"height", "width"},
    "frames": {"frames"},
    "steps": {"steps"},
    "steps * height * width": {"steps", "height", "width"},
    "min(frames, 16) * height * width": {"frames", "height", "width"},
}
#: "a term in steps", "a term in frames*height*width, steps": the directions a hint asks for.
ASKED = re.compile(r"a term in ([\w*]+(?:, [\w*]+)*)")


@functools.cache
def records() -> tuple[WarmupRecord, ...]:
    from dslc.build import load_text

    pipeline = load_text(formula_text(KINK), "kinked.wf")["kinked"]
    session = Session(Kinked(KINK), pipeline, "cpu")  # type: ignore[arg-type]  # a __call__ of its own keywords
    return tuple(session.run(size) for size in SIZES)


def drawn(denoising: list[str], decoding: list[str]):
    from dslc.build import load_text

    text = formula_text(KINK)
    text = text.replace(
        "        memory ~ frames * height * width\n        time",
        f"        memory ~ [{', '.join(denoising)}]\n        time",
    )
    start = text.index("memory ~ [1 *")
    end = text.index("\n", start)
    text = text[:start] + f"memory ~ [{', '.join(decoding)}]" + text[end:]
    return load_text(text, "drawn.wf")["kinked"]


terms = st.lists(st.sampled_from(sorted(TERMS)), min_size=1, max_size=3, unique=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(denoising=terms, decoding=terms)
def test_no_hint_asks_for_a_term_the_formula_declares(denoising, decoding):
    pipeline = drawn(denoising, decoding)
    declared = {
        "DenoisingStage": set().union(*(TERMS[t] for t in denoising)),
        "DecodingStage": set().union(*(TERMS[t] for t in decoding)),
    }
    findings = check(pipeline, records(), TARGET, "cpu-live-tensors", (Quantity.MEMORY,)).findings
    for finding in findings:
        for asked in ASKED.findall(finding.next_step):
            for direction in asked.split(", "):
                reads = set(direction.split("*"))
                assert not reads & declared[finding.stage], (direction, finding)
        if finding.kind in NOTES:
            assert finding.next_step.startswith("none needed"), finding
