"""The running example of docs/language.md, compiled by dslc and loaded by the runtime, gives its
values (tests/test_docs.py runs the page's own blocks too).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dslc.build import load_program
from dslc.compiler import compile_text
from tests.examples import LANGUAGE_EXAMPLE, ROOT, program_of


def book():
    result = compile_text(LANGUAGE_EXAMPLE, "wan.wf")
    assert result.diagnostics == ()
    return load_program(program_of(result))


def test_loader_example_values() -> None:
    wan = book()["wan2_2_t2v_a14b"]
    assert wan.stages == ("TextEncodingStage", "DenoisingStage", "DecodingStage")
    assert wan.default_workload == {
        "steps": 40,
        "frames": 81,
        "height": 720,
        "width": 1280,
        "cfg": True,
    }
    assert wan.iterations("DenoisingStage", steps=4) == 4
    values = wan.evaluate(steps=4)
    assert values["DenoisingStage"].iterations == 4
    assert values["DenoisingStage"].memory == 21 * 45 * 80
    assert values["DenoisingStage"].time == 2 * 21 * 45 * 80
    assert wan.stage_iterations(probe={"steps": 4})["DenoisingStage"] == (4, 40)
    assert wan.is_admissible(frames=80) is False
    assert wan.largest_admissible("frames", at_most=61) == 61
    assert wan.largest_admissible("frames", at_most=60) == 57


def test_inheritance_examples() -> None:
    formulas = book()
    assert formulas["wan2_2_i2v_a14b"].stages[-1] == "ImageEncodingStage"
    assert formulas["wan2_1_t2v_dmd"].iterations("DenoisingStage") == 4
    assert formulas["wan2_1_t2v_dmd"].iterations("DenoisingStage", steps=40) == 4
    assert formulas["minimax_h3"].iterations("DenoisingStage") == 49


def test_eval_json_of_the_command_line(tmp_path: Path) -> None:
    source = tmp_path / "wan.wf"
    source.write_text(LANGUAGE_EXAMPLE)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dslc.cli",
            "eval",
            str(source),
            "minimax_h3",
            "--set",
            "steps=4",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert json.loads(out.stdout) == {
        "pipeline": "minimax_h3",
        "params": {"steps": 4},
        "stages": {"DenoisingStage": {"iterations": 3, "memory": 1, "time": 1}},
    }
