"""``--model DIR``: a pipeline saved with ``save_pretrained`` is calibrated, planned and inferred
from its folder (local files only), with ``--dtype``; a folder that is no pipeline is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.cli.calibrate import calibrate
from calibration.cli.infer import infer
from calibration.cli.plan import plan
from calibration.core.folder import folder_factory, pipeline_class
from calibration.errors import CalibrationError
from calibration.examples import EXAMPLES

pytest.importorskip("diffusers")

ROOT = Path(__file__).resolve().parents[3]
FLUX = ["--formulas", str(ROOT / "formulas" / "flux.wf"), "--name", "flux1_dev"]
SHAPES = ["--probe", "steps=1,height=32,width=32", "--target", "steps=2,height=64,width=64"]
QUICK = ["--repeat", "1", "--no-time-probe"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny FLUX example, saved as a diffusers folder."""
    where = tmp_path_factory.mktemp("tiny-flux")
    EXAMPLES["flux"].build(0).save_pretrained(where)  # type: ignore[attr-defined]
    return where


def test_a_saved_pipeline_calibrates_from_its_folder(folder, tmp_path):
    saved = tmp_path / "calibration.json"
    args = ["--model", str(folder), *FLUX, *SHAPES, *QUICK, "--save", str(saved)]
    result = CliRunner().invoke(calibrate, args)
    assert result.exit_code == 0, result.output
    document = json.loads(saved.read_text())
    assert document["pipeline"] == "flux1_dev"
    assert {"DenoisingStage", "DecodingStage"} <= {p["stage"] for p in document["phases"]}


def test_the_folder_is_loaded_in_the_dtype_asked_and_from_local_files_only(folder):
    import torch

    pipe = folder_factory(folder, "bfloat16").build(0)
    assert next(pipe.transformer.parameters()).dtype == torch.bfloat16  # type: ignore[attr-defined]
    assert pipeline_class(folder) == "FluxPipeline"


def test_plan_reads_the_same_folder(folder):
    device = ["--device-memory", "64MiB", "--reserve", "0"]
    args = ["--model", str(folder), *FLUX, *SHAPES, *QUICK, *device]
    result = CliRunner().invoke(plan, args)
    assert result.exit_code == 0, result.output
    assert "transformer" in result.output


def test_infer_drafts_from_the_folder(folder, tmp_path):
    draft = tmp_path / "draft.wf"
    args = [
        "--model",
        str(folder),
        "--axis",
        "steps=2 in [1, 4] -> num_inference_steps probe",
        "--axis",
        "height=32 in [16, 64] -> height probe",
        "--axis",
        "width=32 in [16, 64] -> width probe",
        "-o",
        str(draft),
    ]
    result = CliRunner().invoke(infer, args)
    assert result.exit_code in (0, 5), result.output  # 5: a proposal left open, the draft written
    text = draft.read_text()
    assert f"pipeline {folder.name.replace('-', '_')}" in text and "stage " in text
    assert "--model" in text.splitlines()[0]  # the header names where it came from


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--model", "no/such/folder"], 1, "--model: no folder"),
        (["--dtype", "float16"], 2, "--dtype and --variant load the weights of --model"),
        (["--model", ".", "--pipeline", "x.py:build"], 2, "one of --model DIR or --pipeline"),
        (["--model", "."], 1, "has no model_index.json"),
    ],
)
def test_folder_mistakes_are_named(args, code, message):
    result = CliRunner().invoke(calibrate, [*args, *FLUX, *SHAPES, *QUICK])
    assert result.exit_code == code, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_folder_without_a_class_name_is_refused(tmp_path):
    (tmp_path / "model_index.json").write_text('{"unet": ["diffusers", "UNet2DModel"]}')
    with pytest.raises(CalibrationError, match="names no _class_name"):
        folder_factory(tmp_path)
