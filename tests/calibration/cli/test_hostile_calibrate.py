"""`dslc calibrate` on a formula whose fit at the target is beyond a float (issue 33): memory
`height ** 60 * height ** 60` targeted at height 4096 from sizes of height 8 to 32 was an
OverflowError (exit 3) in the findings' explanations and the scaled bound's reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dslc.cli import cli

pytest.importorskip("diffusers")

DATA = Path(__file__).resolve().parents[1] / "data"
PIPELINE = str(Path(__file__).resolve().parents[1] / "custom_pipeline.py") + ":build"
DENOISE = "memory ~ [latent_pixels * batch, max(min(steps - 1, 4), 2) * latent_pixels]  # + ets"


@pytest.mark.slow
def test_a_fit_beyond_a_float_at_the_target_is_no_exit_3(tmp_path):
    formulas = tmp_path / "pow.wf"
    text = (DATA / "custom_sd.wf").read_text()
    assert DENOISE in text
    formulas.write_text(
        text.replace(DENOISE, "memory ~ [latent_pixels * batch, height ** 60 * height ** 60]")
    )
    result = CliRunner().invoke(
        cli,
        [
            "calibrate", "--pipeline", PIPELINE, "--formulas", str(formulas), "--name", "custom_sd",
            "--probe", "steps=1,height=16,width=16", "--target", "steps=2,height=4096,width=64",
            "--warmup", "steps=1,height=8,width=8", "--repeat", "1", "--no-time-probe",
        ],
    )  # fmt: skip
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1, 5), result.output
    assert "verdict:" in result.stdout
