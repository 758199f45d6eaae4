"""Measurements against formulas, on real tiny diffusers pipelines: a missing term and a probe below
the steady regime are both caught (calibration.probes.findings)."""

from __future__ import annotations

import pytest

from calibration.core.host import quiet_libraries
from calibration.core.session import Session
from calibration.examples import EXAMPLES
from calibration.probes.findings import check

pytest.importorskip("diffusers")


@pytest.fixture(scope="module")
def wan_session(wan_1_3b):
    example = EXAMPLES["wan"]
    with quiet_libraries():
        yield Session(example.build(0), wan_1_3b, "cpu", call_kwargs=example.call_kwargs)


TARGET = {"steps": 4, "frames": 17, "height": 128, "width": 128, "cfg": False}


def _check(session, records):
    return check(session.formulas, records, TARGET, session.recorder.backend.name).findings


def _runs(session, shapes):
    """A warmup request first (checks leave the first request out: it pays one-time costs)."""
    with quiet_libraries():
        return [session.run(shape) for shape in [shapes[0], *shapes]]


@pytest.mark.slow
def test_a_term_the_formula_leaves_out_is_a_formula_mismatch(wan_session):
    # SDPA's math backend materialises the tokens x tokens attention scores, but wan2_1_t2v_1_3b
    # declares `memory ~ tokens` for denoising (its _math_attention sibling declares both terms).
    from torch.nn.attention import SDPBackend, sdpa_kernel

    shapes = [
        {"steps": 1, "frames": 5, "height": side, "width": side, "cfg": False}
        for side in (32, 48, 64, 80)
    ]
    with sdpa_kernel(SDPBackend.MATH):
        records = _runs(wan_session, shapes)
    assert all(r.ok for r in records)
    findings = {(f.kind, f.stage, f.quantity): f for f in _check(wan_session, records)}
    finding = findings[("formula-mismatch", "DenoisingStage", "memory")]
    assert finding.direction == "height*width"
    assert finding.actionable and finding.risk > 0 and finding.next_step
    assert "do not explain the measured sizes" in finding.message
    assert len(finding.points) == 4


@pytest.mark.slow
def test_a_video_vae_probed_at_its_cheapest_frames_is_outside_the_regime(wan_session):
    # The Wan VAE decodes causally, one latent frame at a time; the first chunks fill its feature
    # cache, so 1 and 5 frames (1 and 2 latent frames) are off the line that 9, 13, 17 frames
    # follow.
    shapes = [
        {"steps": 1, "frames": frames, "height": 32, "width": 32, "cfg": False}
        for frames in (1, 5, 9, 13, 17)
    ]
    records = _runs(wan_session, shapes)
    findings = {(f.kind, f.stage, f.quantity): f for f in _check(wan_session, records)}
    finding = findings[("probe-regime", "DecodingStage", "memory")]
    assert [p["frames"] for p in finding.out_of_regime] == [5, 1]
    assert "outside the formula's steady regime" in finding.message
    assert ("formula-mismatch", "DecodingStage", "memory") not in findings


#: `dslc calibrate --example wan`'s target (calibration.examples.wan.TARGET; CFG on by default).
EXAMPLE_TARGET = {"steps": 8, "frames": 17, "height": 64, "width": 64, "cfg": True}
#: The sizes `dslc calibrate --example wan` measures, all with CFG.
CFG_SHAPES = [
    {"steps": 2, "frames": 17, "height": h, "width": w, "cfg": True}
    for h, w in ((32, 32), (48, 32), (48, 48), (48, 64))
]


def test_sizes_that_agree_with_the_formula_leave_nothing_to_act_on(wan_session):
    # The memory the formulas declare explains the example's sizes to a few bytes (the exact CPU
    # backend counts every byte: what is left is a residual note whose risk is added to the
    # bound, never a finding to act on).
    records = _runs(wan_session, CFG_SHAPES)
    backend = wan_session.recorder.backend.name
    findings = check(wan_session.formulas, records, EXAMPLE_TARGET, backend).findings
    memory = [f for f in findings if f.quantity == "memory"]
    assert all(f.kind == "residual" and f.share < 0.005 for f in memory), memory


def test_a_target_without_cfg_from_sizes_all_with_it_is_not_estimable_along_cfg(wan_session):
    # Denoising memory has a term of its own under CFG (formulas/wan.wf): sizes that all run CFG
    # cannot tell it from the pass's, so a target without CFG is named, not guessed.
    records = _runs(wan_session, CFG_SHAPES)
    findings = {(f.kind, f.stage): f for f in _check(wan_session, records)}
    finding = findings[("not-estimable", "DenoisingStage")]
    assert finding.direction == "cfg"
    assert "along cfg" in finding.next_step


def test_a_target_with_cfg_beyond_probes_without_it_leaves_nothing_to_act_on(wan_session):
    # The seeded mistake wan-time-no-cfg's sizes, with the correct formula: probes without CFG,
    # one size and the target with it. Under CFG the denoising loop keeps latent-sized tensors
    # referenced across its passes (formulas/wan.wf): a term in tokens the formula declares, so
    # the cfg size fits it instead of raising a formula-mismatch along cfg.
    target = {"steps": 6, "frames": 9, "height": 64, "width": 64, "cfg": True}
    shapes = [
        {"steps": 2, "frames": 9, "height": h, "width": w, "cfg": cfg}
        for h, w, cfg in ((32, 32, False), (48, 32, False), (48, 48, False), (48, 48, True))
    ]
    records = _runs(wan_session, shapes)
    backend = wan_session.recorder.backend.name
    memory = [
        f
        for f in check(wan_session.formulas, records, target, backend).findings
        if f.quantity == "memory"
    ]
    assert memory, "the exact CPU backend leaves residual notes at these sizes"
    assert all(f.kind == "residual" and f.share < 0.005 for f in memory), memory
