"""Issue 43's acceptance: a pipeline class the repository never mentions (diffusers'
``AuraFlowPipeline``, built tiny from random weights and saved with ``save_pretrained``) from its
folder to a validated plan in the newcomer's commands -- ``dslc infer --model DIR`` from a bare
skeleton, ``dslc check`` of the draft, ``dslc calibrate --model DIR --verify``, ``dslc plan
--model DIR`` on a device smaller than the pipeline's peak with ``--validate`` -- each exit 0,
and the same draft through the Python facade with the pipe in hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dslc.cli import cli

pytest.importorskip("diffusers")

SHAPES = ["--probe", "steps=1,height=32,width=32", "--target", "steps=2,height=64,width=64"]
QUICK = ["--repeat", "1", "--no-time-probe"]
#: Under the pipeline's peak at the target (4.61 MiB with its 999 KiB of weights): a component
#: must leave the device; over the largest phase's (4.25 MiB), so a plan exists.
CAPACITY = "4.4MiB"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny AuraFlow's folder and the skeleton a user writes for it."""
    from tests.calibration.aura_flow import SKELETON, build

    where = tmp_path_factory.mktemp("aura")
    build(0).save_pretrained(where / "model")  # type: ignore[attr-defined]
    (where / "skeleton.wf").write_text(SKELETON)
    return where / "model", where / "skeleton.wf"


def _dslc(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, (args, result.output)
    return result.stdout


@pytest.fixture(scope="module")
def drafted(saved: tuple[Path, Path]) -> tuple[Path, Path, dict[str, object]]:
    """`dslc infer --model DIR` from the bare skeleton (no --base, no WARMUP): the folder, the
    draft and the JSON report."""
    model, skeleton = saved
    draft = skeleton.with_name("draft.wf")
    out = _dslc(
        "infer", "--model", str(model), "--params", str(skeleton), "-o", str(draft), "--json"
    )
    return model, draft, json.loads(out)


@pytest.mark.slow
def test_from_a_saved_folder_to_a_validated_plan(drafted, tmp_path: Path):
    model, draft, report = drafted
    calibration = tmp_path / "calibration.json"
    assert report["base"] == {"steps": 1, "height": 16, "width": 16}  # the cheapest, not 256
    assert {s["name"] for s in report["stages"]} >= {"DenoisingStage", "DecodingStage"}
    _dslc("check", str(draft))
    model_args = ["--model", str(model), "--formulas", str(draft), *SHAPES, *QUICK]
    _dslc("calibrate", *model_args, "--verify", "--save", str(calibration))
    assert json.loads(calibration.read_text())["pipeline"] == "aura_flow"
    out = _dslc("plan", *model_args, "--device-memory", CAPACITY, "--reserve", "0", "--validate")
    assert "verdict: holds" in out, out
    assert "offloaded" in out or "layerwise" in out, out  # smaller than the pipeline: moved


@pytest.mark.slow
def test_the_facade_takes_the_pipe_in_hand(drafted):
    from diffusers import DiffusionPipeline

    from calibration.facade import calibrate
    from calibration.placement.mechanisms import has_offload_hooks

    model, draft, _ = drafted
    pipe = DiffusionPipeline.from_pretrained(str(model), local_files_only=True)
    cal = calibrate(
        pipe,
        draft,
        target={"steps": 2, "height": 64, "width": 64},
        probe={"steps": 1, "height": 32, "width": 32},
        repeat=1,
        time_probe=False,
    )
    assert cal.calibration.pipeline == "aura_flow"
    plan = cal.plan(capacity=CAPACITY, reserve=0, device="cpu")
    moved = {p.component for p in plan.plan.placements if p.kind.value != "resident"}
    assert moved, plan.plan.placements
    handle = plan.apply(pipe)
    assert {n for n in moved if has_offload_hooks(getattr(pipe, n))} == moved
    handle.undo()
    assert not any(has_offload_hooks(getattr(pipe, n)) for n in moved)
