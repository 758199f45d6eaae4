"""`dslc infer` on hostile input that never reaches a pipeline run (issue 33): the skeleton file,
the base and its origins, the axes, the options. Each is a typed exit (1 or 2) naming what the
user gave; none is an exit 3, a hang or a read of unbounded size."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.errors import CalibrationError
from calibration.infer.layout import StagePlan, Use, stage_node
from calibration.infer.measure import _other_steps, load, printed, skeleton_tree, with_stages
from dslc.cli import cli

HERE = Path(__file__).resolve().parent
TINY = HERE / "data" / "tiny.wf"
SD = HERE.parent / "data" / "skeletons" / "custom_sd.wf"
PIPES = HERE / "hostile_pipelines.py"
STOP = "calibration.fuzzing.mutate:stop"  # a factory that ends the run where the pipeline is built
MiB = 1 << 20


def infer(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["infer", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def test_a_fifo_a_device_link_and_a_huge_file_are_refused_naming_the_file(tmp_path):
    fifo, zero, huge = tmp_path / "fifo.wf", tmp_path / "zero.wf", tmp_path / "huge.wf"
    os.mkfifo(fifo)  # opened for reading it would wait for a writer forever
    zero.symlink_to("/dev/zero")  # read to its end it never ends
    with huge.open("wb") as f:  # 200 MiB, sparse: `dslc check` refuses it at once
        f.write(TINY.read_bytes())
        f.truncate(200 * MiB)
    for path, says in ((fifo, "a FIFO"), (zero, "a device"), (huge, "1,048,576 bytes")):
        tracemalloc.start()
        try:
            code, output = infer("--pipeline", STOP, "--params", str(path))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert code == 1 and str(path) in output and says in output, output
        assert peak < 16 * MiB  # at most the limit read, never the file


def test_a_skeleton_error_names_the_params_file_and_its_line(tmp_path):
    bad = tmp_path / "bad.wf"
    bad.write_text(TINY.read_text().replace("call height = height", "call height = heigth"))
    code, output = infer("--pipeline", STOP, "--params", str(bad))
    assert code == 1 and f"{bad}:6:" in output, output
    assert "<skeleton>" not in output


def test_a_skeleton_without_params_names_where_the_base_came_from(tmp_path):
    empty = tmp_path / "empty.wf"
    empty.write_text("pipeline p {\n}\n")
    code, output = infer("--example", "flux", "--params", str(empty))
    assert code == 1 and "the example flux's warmup names" in output, output
    assert "it declares no params" in output and "(it has )" not in output


@pytest.mark.parametrize(
    ("base", "says"),
    [
        ("steps=true", "--base: steps takes an int; got True (bool)"),
        ("height=1000000000", "is not admissible"),
        ("steps=1000", "--base: steps=1000 is above the default workload's steps=50"),
        ("nope=1", "--base names 'nope'"),
    ],
)
def test_a_base_of_the_wrong_type_or_above_the_default_is_exit_1(base, says):
    code, output = infer("--pipeline", STOP, "--params", str(TINY), "--base", base)
    assert code == 1 and says in output, output


def test_a_base_in_a_wide_range_is_bounded_by_the_default_workload(tmp_path):
    wide = tmp_path / "wide.wf"
    wide.write_text(TINY.read_text().replace("in [1, 1000]", "in [1, 10**12]"))
    for steps in (10**9, 10**6):
        code, output = infer("--pipeline", STOP, "--params", str(wide), "--base", f"steps={steps}")
        assert code == 1 and f"steps={steps} is above the default workload's" in output, output


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("True", "steps takes an int; got True"),
        ("'2'", "steps is '2' (str)"),
        ("2.5", "steps is 2.5 (float)"),
    ],
)
def test_a_module_warmup_of_the_wrong_type_is_exit_1(tmp_path, value, says):
    module = tmp_path / "shaped.py"
    module.write_text(
        f"from calibration.examples.tiny_sd import build, call_kwargs\n"
        f"WARMUP = {{'steps': {value}, 'height': 16}}\n"
    )
    code, output = infer("--pipeline", f"{module}:build", "--params", str(TINY))
    assert code == 1 and says in output and "WARMUP of" in output, output


def test_a_module_warmup_with_an_int_key_is_exit_1(tmp_path):
    module = tmp_path / "keyed.py"
    module.write_text("def build(seed):\n    raise AssertionError\nWARMUP = {1: 2}\n")
    code, output = infer("--pipeline", f"{module}:build", "--params", str(TINY))
    assert code == 1 and "WARMUP of" in output and "the key 1 is not a param name" in output


@pytest.mark.parametrize(
    "option", [("--seed", str(10**23)), ("--timeout", "nan"), ("--timeout", "inf")]
)
def test_out_of_range_options_are_usage_errors(option):
    code, output = infer("--pipeline", STOP, "--params", str(TINY), *option)
    assert code == 2 and option[0] in output, output


@pytest.mark.parametrize(
    "axis", ["x=\u0663 in [\u0661, \u0669]", "x=3 in [1, \u0669]", "x\u0663=3", "x=" + "9" * 31]
)
def test_non_ascii_digits_and_too_many_digits_in_an_axis_are_usage_errors(axis):
    code, output = infer("--pipeline", STOP, "--axis", axis)
    assert code == 2 and "--axis" in output, output


def test_a_25_digit_default_is_an_axis_the_language_takes():
    default = "9" * 25
    code, output = infer("--pipeline", STOP, "--axis", f"x={default} in [1, {'9' * 30}]")
    assert code == 1 and "it called sys.exit('fuzz: stopped" in output, output  # got that far


def test_a_steps_axis_with_one_admissible_value_is_refused_before_any_run():
    axis = "steps=2 in [1, 2] where steps % 2 == 0 -> num_inference_steps"
    code, output = infer("--pipeline", STOP, "--axis", axis)
    assert code == 1 and "steps has no admissible value" in output, output
    assert "stopped where the pipeline is built" not in output  # refused before building it


def test_discovery_takes_the_nearest_other_admissible_step_count():
    text = TINY.read_text().replace("50 in [1, 1000]", "2 in [1, 4] where steps % 2 == 0")
    skeleton = load(text, "tiny", "tiny.wf")
    assert _other_steps(skeleton, {"steps": 2, "height": 16}, "steps")["steps"] == 4
    text = TINY.read_text().replace("50 in [1, 1000]", "2 in [1, 2]")
    skeleton = load(text, "tiny", "tiny.wf")
    assert _other_steps(skeleton, {"steps": 2, "height": 16}, "steps")["steps"] == 1
    with pytest.raises(CalibrationError, match="no admissible value within"):
        _other_steps(load(text.replace("[1, 2]", "[2, 2]"), "tiny", "t"), {"steps": 2}, "steps")


def test_a_pipeline_with_no_modules_is_not_told_to_add_a_stage():
    code, output = infer("--pipeline", f"{PIPES}:empty", "--params", str(TINY))
    assert code == 1 and "no torch module among its components" in output, output
    assert "stage DenoisingStage uses" not in output


@pytest.mark.parametrize(
    ("skeleton", "kept"),
    [
        ("pipeline p {\n    param x: int = 1\n}  # the end\n", 2),
        ("pipeline p { param x: int = 1 }\n", 0),
        ("# }\npipeline p {\n    param x: int = 1\n}\n\n# } after\n", 3),
    ],
)
def test_stages_go_before_the_closing_brace_wherever_it_is(skeleton, kept):
    stage = stage_node(StagePlan("S", (Use("m"),), False))
    text = printed(with_stages(skeleton_tree(skeleton), [stage]))
    assert load(text, "p", "t").stages == ("S",)
    assert text.splitlines()[:kept] == skeleton.splitlines()[:kept]  # lines keep their numbers
