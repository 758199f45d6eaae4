"""A calibration a serving engineer can rely on (issue 18), on the real tiny SD pipeline of the
tests: the tutorial's own formula file either holds its bound or is named, facts the pipeline
contradicts are refused before anything runs, and the verdict is in the exit status."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.calibrate.verdict import STRICT_FAILED, VERIFY_FAILED
from calibration.cli.calibrate import calibrate

pytest.importorskip("diffusers")

ROOT = Path(__file__).resolve().parents[2]
FACTORY = str(ROOT / "tests/calibration/custom_pipeline.py") + ":build"
CUSTOM_SD = ROOT / "tests/calibration/data/custom_sd.wf"
# The tutorial's command (docs/tutorial.md, section 6), one round: memory is exact, one shows it.
SHAPES = ["--probe", "steps=2,height=32,width=32", "--target", "steps=6,height=64,width=64"]


def _tutorial_file(tmp_path: Path) -> Path:
    """docs/tutorial.md's own `my_sd.wf`, as a reader writes it (no scheduler-history term)."""
    text = (ROOT / "docs/tutorial.md").read_text()
    found = re.search(r"<!-- file: my_sd.wf -->\n```wf\n(.*?)```", text, re.DOTALL)
    assert found is not None, "the tutorial no longer shows my_sd.wf"
    path = tmp_path / "my_sd.wf"
    path.write_text(found.group(1))
    return path


def _calibrate(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(calibrate, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow
def test_the_tutorials_own_file_holds_its_bound_or_names_the_stage_and_steps(tmp_path):
    path = _tutorial_file(tmp_path)
    status, out, err = _calibrate(
        "--pipeline", FACTORY, "--formulas", str(path), "--name", "my_sd", *SHAPES,
        "--verify", "--repeat", "1", "--json",
    )  # fmt: skip
    doc = json.loads(out)
    # Coverage: the target has more steps than the probe, so some size moved steps alone.
    assert any("moving steps" in e["why"] for e in doc["extra_sizes"]), doc["extra_sizes"]
    assert doc["extra_cost"] < 1
    held = all(
        e["bound_peak_bytes"] >= e["measured_peak_bytes"]
        for e in [*doc["phases"], doc["request"]]
        if e["measured_peak_bytes"] is not None
    )
    named = [
        f
        for f in doc["findings"]
        if f["actionable"] and f["stage"] == "DenoisingStage" and "steps" in (f["direction"] or "")
    ]
    if held:
        assert status == 0, err
        # The history the file leaves out is still reported, with its risk added to the bound.
        steps = [f for f in doc["findings"] if f["stage"] == "DenoisingStage"]
        assert any("steps" in (f["direction"] or "") for f in steps), doc["findings"]
    else:
        assert named and status == VERIFY_FAILED, (status, doc["findings"])
    assert doc["verdict"]["holds"] == (status == 0)


@pytest.mark.slow
def test_the_right_file_holds_with_margins_from_evidence(tmp_path):
    status, out, err = _calibrate(
        "--pipeline", FACTORY, "--formulas", str(CUSTOM_SD), "--name", "custom_sd", *SHAPES,
        "--verify", "--repeat", "1", "--json", "--strict",
    )  # fmt: skip
    doc = json.loads(out)
    assert status == 0, (err, doc["findings"])
    assert not [f for f in doc["findings"] if f["actionable"]]
    compared = [
        (entry["measured_peak_bytes"], entry["bound_peak_bytes"])
        for entry in [*doc["phases"], doc["request"]]
        if entry["measured_peak_bytes"] is not None
    ]
    assert compared and all(m <= bound <= m * 1.05 for m, bound in compared), compared
    assert any(m["source"] == "evidence" for m in doc["margins"]), doc["margins"]


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    text = CUSTOM_SD.read_text()
    assert text.count(old) == 1
    path = tmp_path / "custom_sd.wf"
    path.write_text(text.replace(old, new))
    return path


def test_a_call_argument_the_pipeline_does_not_take_is_refused_before_any_run(tmp_path):
    # FluxPipeline.__call__ takes no **kwargs: `num_frames` would fail every request.
    text = (ROOT / "formulas/flux.wf").read_text()
    old = "    call width = width\n"
    assert text.count(old) == 1
    path = tmp_path / "flux.wf"
    path.write_text(text.replace(old, old + "    call num_frames = 1\n"))
    status, out, err = _calibrate("--example", "flux", "--formulas", str(path))
    assert status == 1, (out, err)
    line = text[: text.index(old)].count("\n") + 2
    assert f"{path}:{line}: " in err and "`call num_frames`" in err and "FluxPipeline" in err


def test_a_stage_that_uses_what_is_no_method_is_refused_before_any_run(tmp_path):
    path = _edited(tmp_path, "uses vae.decode", "uses vae.__class__")
    status, out, err = _calibrate(
        "--pipeline", FACTORY, "--formulas", str(path), "--name", "custom_sd", *SHAPES
    )
    assert status == 1, (out, err)
    assert "vae.__class__" in err and "no method" in err


@pytest.mark.slow
def test_a_wrong_iteration_count_fails_strict_and_names_the_stage(tmp_path):
    path = _edited(
        tmp_path,
        "iterations = if steps > 1 then steps + 1 else 1",
        "iterations = steps",
    )
    status, out, _ = _calibrate(
        "--pipeline", FACTORY, "--formulas", str(path), "--name", "custom_sd", *SHAPES,
        "--repeat", "1", "--no-time-probe", "--strict", "--json",
    )  # fmt: skip
    doc = json.loads(out)
    found = [f for f in doc["findings"] if f["kind"] == "iteration-mismatch"]
    assert found and found[0]["stage"] == "DenoisingStage" and found[0]["next_step"], found
    assert status == STRICT_FAILED and not doc["verdict"]["holds"]


def test_every_request_failing_is_an_error_not_a_table(tmp_path):
    broken = tmp_path / "broken_sd.py"
    source = FACTORY.split(":")[0]
    broken.write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('custom_pipeline', {source!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "call_kwargs = module.call_kwargs\n"
        "def build(seed):\n"
        "    pipe = module.build(seed)\n"
        "    def broken(*args, **kwargs):\n"
        "        raise RuntimeError('the UNet is broken')\n"
        "    pipe.unet.forward = broken\n"
        "    return pipe\n"
    )
    status, out, err = _calibrate(
        "--pipeline", f"{broken}:build", "--formulas", str(CUSTOM_SD), "--name", "custom_sd",
        *SHAPES, "--repeat", "1", "--no-time-probe",
    )  # fmt: skip
    assert status == 1, (out, err)
    assert "every request failed" in err and "the UNet is broken" in err
