"""`dslc plan --validate[=MODE]` through click's CliRunner: steps, verdict, exit statuses."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from calibration.calibrate.verdict import STRICT_FAILED, VERIFY_FAILED
from calibration.cli.plan import plan
from tests.calibration.cli.runs import SMALL_FLUX

pytest.importorskip("accelerate")

RUN = [*SMALL_FLUX, "--reserve", "0"]


def _invoke(*args: str):
    return CliRunner().invoke(plan, [*RUN, *args], catch_exceptions=False)


def test_validate_prints_each_step_and_the_verdict():
    result = _invoke("--device-memory", "1MiB", "--validate")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "mode apply; device 1 MiB, reserve 0 B, usable 1 MiB"
    steps = [line.split()[0] for line in lines[1:] if not line.startswith(" ")]
    assert steps[:-1] == [
        "warmup",
        "probes",
        "estimate",
        "plan",
        "apply",
        "validate",
        "re-warm",
        "serving",
    ]
    assert lines[-1] == "verdict: holds: the plan held on a measured request (validation 1)"


def test_validate_json_is_the_report_with_its_records():
    result = _invoke("--device-memory", "1MiB", "--validate", "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)  # stderr: the start and end notes
    assert (doc["version"], doc["mode"], doc["status"], doc["validated"]) == (1, "apply", 0, True)
    assert doc["placement"]["transformer"] == "layerwise 1/2"
    validate = next(s for s in doc["steps"] if s["name"] == "validate")
    assert validate["outcome"] == "holds" and len(validate["phases"]) == 8
    assert len(doc["records"]) >= 3 and all("phases" in r for r in doc["records"])


@pytest.mark.parametrize(
    ("mode", "status", "validated"),
    [("apply", VERIFY_FAILED, True), ("strict", STRICT_FAILED, True), ("plan", 1, False)],
)
def test_exit_statuses_when_nothing_validates(mode, status, validated):
    result = _invoke("--device-memory", "64KiB", f"--validate={mode}")
    assert result.exit_code == status, result.output
    assert ("NO PLAN VALIDATES" in result.output.splitlines()[-1]) == validated


def test_validate_needs_a_pipeline_to_run(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text("{}")
    result = CliRunner().invoke(
        plan,
        ["--calibration", str(path), "--device-memory", "1MiB", "--reserve", "0", "--validate"],
    )
    assert result.exit_code == 2 and "--validate runs the pipeline" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rank-timeout", "5"], "give --validate"),
        (["--validate", "--rank-timeout", "nan"], "not a finite number"),
        (["--validate", "--rank-timeout", "0"], "--rank-timeout"),
    ],
)
def test_rank_timeout_is_for_validate_and_a_positive_number(args, message):
    result = CliRunner().invoke(plan, [*RUN, "--device-memory", "1MiB", *args])
    assert result.exit_code == 2 and message in result.output, result.output
