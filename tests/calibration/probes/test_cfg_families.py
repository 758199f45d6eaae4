"""Under CFG, diffusers' denoising loops keep more than the pass: latent-sized predictions across
a sequential second pass (formulas/flux.wf, qwen_image.wf, hunyuan_video.wf, helios.wf), beyond
the doubled batch of a batched one (pixart_sigma.wf, cogvideox.wf), the negative embeddings
(sdxl.wf). The shipped formulas declare that term, so sizes with and without CFG leave nothing to
act on and a target with CFG calibrated from probes without it holds (bench/README.md, "CFG
beyond Wan")."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs
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


@attrs.frozen
class Family:
    """A tiny pipeline, its shipped formulas, and the sizes that probe it (in pixels a side)."""

    build: Callable[[int], object]
    call_kwargs: Callable[[int], Mapping[str, object]]
    file: str
    name: str
    extra: Mapping[str, int] = attrs.field(factory=dict)  # frames where the pipeline has them
    sides: tuple[int, int, int] = (32, 48, 64)  # pixels: small, medium, the target's


def _example(
    name: str, file: str, pipeline: str, sides: tuple[int, int, int] = (32, 48, 64)
) -> Family:
    example = EXAMPLES[name]
    return Family(example.build, example.call_kwargs, file, pipeline, sides=sides)


FAMILIES = {
    # sequential CFG: a second transformer call per step
    "flux": _example("flux", "flux.wf", "flux1_dev"),
    "hunyuan_video": Family(
        hunyuan_video.build,
        hunyuan_video.call_kwargs,
        "hunyuan_video.wf",
        "hunyuan_video_t2v",
        {"frames": 5},
    ),
    # one chunk of 33 frames; steps >= 3: the UniPC scheduler holds two outputs from then on
    "helios": Family(helios.build, helios.call_kwargs, "helios.wf", "helios", {"frames": 33}),
    # batched CFG: cond and uncond in one call of twice the batch
    # latent sides of 8 and more (multiples of 4: no UNet padding); SDXL's CFG constant (its
    # negative embeddings) shows against a pass of 128 x 128
    "sdxl": _example("sdxl", "sdxl.wf", "sdxl_base", (64, 128, 256)),
    "pixart": _example("pixart", "pixart_sigma.wf", "pixart_sigma_1024", (64, 96, 128)),
    "cogvideox": attrs.evolve(
        _example("cogvideox", "cogvideox.wf", "cogvideox_2b"), extra={"frames": 17}
    ),
}


def _mixed(family: Family) -> list[dict[str, object]]:
    """Sizes without CFG and one with it: what `dslc calibrate` measures for a target with CFG
    from a probe without it (it moves cfg alone towards the target)."""
    small, medium, _ = family.sides
    sides = ((small, small, False), (medium, small, False), (medium, medium, False))
    return [
        {"steps": 3, **family.extra, "height": h, "width": w, "cfg": cfg}
        for h, w, cfg in (*sides, (medium, medium, True))
    ]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_sizes_with_and_without_cfg_leave_nothing_to_act_on(name):
    family = FAMILIES[name]
    formulas = load_pipeline(FORMULAS / family.file, family.name)
    shapes = [{**formulas.default_workload, **s} for s in _mixed(family)]
    side = family.sides[2]
    target = {**shapes[0], "steps": 8, "height": side, "width": side, "cfg": True}
    with quiet_libraries():
        session = Session(family.build(0), formulas, "cpu", call_kwargs=family.call_kwargs)
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
