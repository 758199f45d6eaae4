"""`dslc calibrate` on a formula whose fit at the target is beyond a float (issue 33): memory
`height ** 60 * height ** 60` targeted at height 4096 from sizes of height 8 to 32 was an
OverflowError (exit 3) in the findings' explanations and the scaled bound's reason; at height
99,999,992 the fit itself is past a float (issue 39): a typed error naming the stage, exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dslc.cli import cli

pytest.importorskip("diffusers")

DATA = Path(__file__).resolve().parents[1] / "data"
PIPELINE = str(Path(__file__).resolve().parents[1] / "custom_pipeline.py") + ":build"
DENOISE = "memory ~ [latent_pixels * batch, max(min(steps - 1, 4), 2) * latent_pixels]  # + ets"


def _calibrate(tmp_path, height_range: str, height: int):
    """`dslc calibrate` of the pow formula, height ranging over ``height_range``, at ``height``."""
    formulas = tmp_path / "pow.wf"
    text = (DATA / "custom_sd.wf").read_text()
    assert DENOISE in text and "height: int = 512 in [8, 4096]" in text
    text = text.replace(DENOISE, "memory ~ [latent_pixels * batch, height ** 60 * height ** 60]")
    height_param = f"height: int = 512 in {height_range}"
    formulas.write_text(text.replace("height: int = 512 in [8, 4096]", height_param))
    target = f"steps=2,height={height},width=64"
    return CliRunner().invoke(
        cli,
        [
            "calibrate", "--pipeline", PIPELINE, "--formulas", str(formulas), "--name", "custom_sd",
            "--probe", "steps=1,height=16,width=16", "--target", target,
            "--warmup", "steps=1,height=8,width=8", "--repeat", "1", "--no-time-probe",
        ],
    )  # fmt: skip


@pytest.mark.slow
def test_a_fit_beyond_a_float_at_the_target_is_no_exit_3(tmp_path):
    result = _calibrate(tmp_path, "[8, 4096]", 4096)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1, 5), result.output
    assert "verdict:" in result.stdout


@pytest.mark.slow
def test_a_fit_past_a_float_at_the_target_is_a_typed_error_naming_the_stage(tmp_path):
    result = _calibrate(tmp_path, "[8, 100_000_000]", 99_999_992)
    assert isinstance(result.exception, SystemExit), result.output  # not an OverflowError
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(
        "error: DenoisingStage's memory (the fit of its sizes) at the target "
        "steps=2,height=99999992,width=64,cfg=true is about 2**"
    ), errors[0]
    assert "beyond what a float holds (2**1024): calibrate for a smaller --target" in errors[0]
