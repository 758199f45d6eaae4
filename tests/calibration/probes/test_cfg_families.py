"""Under CFG run as a sequential second pass, diffusers' denoising loops keep latent-sized
predictions alive across passes (formulas/flux.wf, qwen_image.wf, hunyuan_video.wf, helios.wf):
the shipped formulas declare that term, so sizes with and without CFG leave nothing to act on and
a target with CFG calibrated from probes without it holds (bench/README.md, "CFG beyond Wan")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.calibrate.run import load_pipeline
from calibration.cli.calibrate import calibrate
from calibration.core.host import quiet_libraries
from calibration.core.session import Session
from calibration.examples import EXAMPLES
from calibration.probes.findings import check
from tests.calibration.families import helios, hunyuan_video

pytest.importorskip("diffusers")

ROOT = Path(__file__).resolve().parents[3]
FORMULAS = ROOT / "formulas"
#: The stages whose memory carries the held predictions.
HELD = ("DenoisingStage", "DecodingStage")


def _sizes(
    extra: dict[str, int], sides: Sequence[tuple[int, int, bool]]
) -> list[dict[str, object]]:
    return [{"steps": 3, **extra, "height": h, "width": w, "cfg": cfg} for h, w, cfg in sides]


#: Sizes without CFG and one with it, the target with it: what `dslc calibrate` measures for such a
#: target from a probe without CFG (it moves cfg alone towards the target).
MIXED = ((32, 32, False), (48, 32, False), (48, 48, False), (48, 48, True))
FAMILIES = {
    "flux": (EXAMPLES["flux"].build, EXAMPLES["flux"].call_kwargs, "flux.wf", "flux1_dev", {}),
    "hunyuan_video": (
        hunyuan_video.build,
        hunyuan_video.call_kwargs,
        "hunyuan_video.wf",
        "hunyuan_video_t2v",
        {"frames": 5},
    ),
    # one chunk of 33 frames; steps >= 3: the UniPC scheduler holds two outputs from then on
    "helios": (helios.build, helios.call_kwargs, "helios.wf", "helios", {"frames": 33}),
}


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sizes_with_and_without_cfg_leave_nothing_to_act_on(family):
    build, call_kwargs, file, name, extra = FAMILIES[family]
    formulas = load_pipeline(FORMULAS / file, name)
    shapes = [{**formulas.default_workload, **s} for s in _sizes(extra, MIXED)]
    target = {**shapes[0], "steps": 8, "height": 64, "width": 64, "cfg": True}
    with quiet_libraries():
        session = Session(build(0), formulas, "cpu", call_kwargs=call_kwargs)
        records = [session.run(shape) for shape in [shapes[0], *shapes]]
    assert all(r.ok for r in records), [r.error for r in records]
    findings = check(formulas, records, target, session.recorder.backend.name).findings
    held = [f for f in findings if f.quantity == "memory" and f.stage in HELD]
    assert not [f for f in held if f.actionable], [f.message for f in held]


@pytest.mark.slow
def test_qwen_image_with_cfg_from_probes_without_it_holds(tmp_path):
    # QwenImagePipeline's loop keeps noise_pred, neg_noise_pred and comb_pred (and their norms)
    # past its last step, into the stage's setup window: without the cfg term the target's
    # setup peak was over its bound (bound-under, exit 4).
    from tests.calibration.families.qwen_image import PROMPT_TOKENS

    size = f"steps=2,height=48,width=48,prompt_tokens={PROMPT_TOKENS}"
    result = CliRunner().invoke(
        calibrate,
        [
            "--pipeline",
            str(ROOT / "tests/calibration/families/qwen_image.py") + ":build",
            "--formulas",
            str(FORMULAS / "qwen_image.wf"),
            "--name",
            "qwen_image",
            "--warmup",
            f"cfg=false,prompt_tokens={PROMPT_TOKENS}",
            "--probe",
            f"{size},cfg=false",
            "--target",
            f"steps=8,height=64,width=64,cfg=true,prompt_tokens={PROMPT_TOKENS}",
            "--verify",
            "--repeat",
            "1",
            "--json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    memory = [f for f in doc["findings"] if f["quantity"] == "memory"]
    assert not [f for f in memory if f["actionable"]], memory
