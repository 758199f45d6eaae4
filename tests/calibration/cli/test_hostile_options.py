"""The run options of `dslc calibrate` and `dslc plan` bounded at option parsing (issue 33): a
non-finite margin or tolerance, a seed outside torch's range, more threads than cores, a repeat
count past ``MAX_REPEAT``; `plan --validate` with two targets; a module's demo shapes of the wrong
type; a calibration document's path named once. None runs a pipeline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from artifact.limits import MAX_REPEAT
from calibration.fuzzing.mutate import STOP_FACTORY
from dslc.cli import cli

FORMULAS = str(Path(__file__).resolve().parents[1] / "data" / "custom_sd.wf")
RUN = ["--pipeline", STOP_FACTORY, "--name", "custom_sd", "--formulas", FORMULAS]
SHAPES = ["--probe", "steps=1,height=32,width=32", "--target", "steps=2,height=64,width=64"]
PLAN = ["--device-memory", "24GiB"]


def dslc(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


HOSTILE = [
    ("--margin", "nan"),
    ("--margin", "inf"),
    ("--margin", "-inf"),
    ("--margin", "1e309"),
    ("--time-tolerance", "nan"),
    ("--time-tolerance", "inf"),
    ("--seed", str(10**23)),
    ("--seed", str(-(10**23))),
    ("--threads", "100000"),
    ("--threads", str((os.cpu_count() or 1) + 1)),
    ("--repeat", "1000000"),
    ("--repeat", str(MAX_REPEAT + 1)),
]


@pytest.mark.parametrize("command", ["calibrate", "plan"])
@pytest.mark.parametrize("option", HOSTILE, ids=lambda o: f"{o[0]}={o[1][:8]}")
def test_a_hostile_run_option_is_a_usage_error_before_any_work(command, option):
    extra = PLAN if command == "plan" else []
    code, output = dslc(command, *RUN, *SHAPES, *extra, *option)
    assert code == 2 and option[0] in output, output
    assert "stopped where the pipeline is built" not in output  # refused before it


def test_the_largest_accepted_values_reach_the_pipeline():
    cores = str(os.cpu_count() or 1)
    options = ["--margin", "100", "--seed", str(2**64 - 1), "--threads", cores]
    code, output = dslc("calibrate", *RUN, *SHAPES, *options, "--repeat", str(MAX_REPEAT))
    assert code == 1 and "stopped where the pipeline is built" in output, output


def test_plan_validate_with_two_targets_is_a_usage_error_before_any_work():
    code, output = dslc(
        "plan", *RUN, "--target", "steps=1", "--target", "steps=2", *PLAN, "--validate"
    )
    assert code == 2 and "--validate plans for one --target (given 2)" in output, output


def test_plan_validate_json_shows_progress_on_stderr():
    result = CliRunner().invoke(cli, ["plan", *RUN, *SHAPES, *PLAN, "--validate", "--json"])
    assert result.exit_code == 1, result.output
    assert "validate: calibrate, plan, apply and validate" in result.stderr
    assert not result.stdout


def test_a_calibration_document_error_names_its_path_once(tmp_path):
    path = tmp_path / "F.json"
    path.write_text("not json")
    code, output = dslc("plan", "--calibration", str(path), *PLAN)
    assert code == 1 and output.count(str(path)) == 1, output
    assert f"calibration document {path}: not JSON" in output


@pytest.mark.parametrize(
    ("shape", "says"),
    [
        ("{'steps': True}", "WARMUP of"),
        ("{'steps': '2'}", "steps is '2' (str)"),
        ("{1: 2}", "the key 1 is not a param name"),
        ("{'nope': 2}", "names 'nope'"),
        ("[1, 2]", "is list, not a dict of params"),
        ("{'steps': 10**40}", "an int of at most 30 digits"),
    ],
)
def test_a_module_warmup_of_the_wrong_shape_is_exit_1(tmp_path, shape, says):
    module = tmp_path / "shaped.py"
    module.write_text(f"def build(seed):\n    raise SystemExit('built')\nWARMUP = {shape}\n")
    code, output = dslc(
        "calibrate", "--pipeline", f"{module}:build", "--name", "custom_sd",
        "--formulas", FORMULAS, *SHAPES,
    )  # fmt: skip
    assert code == 1 and says in output and "built" not in output, output
