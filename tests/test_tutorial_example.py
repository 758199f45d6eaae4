"""The tutorial's kind of property tests on the repository's own pipelines (`formulas/` compiled
in memory), and checks of docs/tutorial.md itself.

The tutorial's own test file (`test_my_model.py`, on the reader's `my_model.wf`) runs, with every
other command of the page, in `tests/test_docs.py`.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import dslc.compiler
from dslc.build import load_sources, load_text
from dslc.testing import admissible_params, assert_non_decreasing, assert_probe_within_target

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"

book = load_sources([ROOT / "formulas"])
wan = book["wan2_2_t2v_a14b"]
longlive = book["longlive2"]


@given(admissible_params(wan))
def test_more_steps_never_mean_fewer_denoising_iterations(point):
    assert_non_decreasing(wan, "DenoisingStage", "steps", point)


@given(admissible_params(longlive))
def test_longer_videos_never_mean_fewer_longlive_iterations(point):
    assert_non_decreasing(longlive, "DenoisingStage", "frames", point)
    assert_non_decreasing(longlive, "DecodingStage", "frames", point)


@given(st.integers(1, 40), st.sampled_from([1, 5, 17, 41, 81]))
def test_a_cheap_probe_stays_within_the_default_workload(steps, frames):
    assert_probe_within_target(wan, {"steps": steps, "frames": frames})


@settings(max_examples=50)
@given(admissible_params(wan, fixed={"cfg": False}))
def test_every_admissible_point_evaluates(point):
    for stage, values in wan.evaluate(**point).items():
        assert values.iterations >= 0 and values.memory >= 0 and values.time >= 0, stage


# --------------------------------------------------------------------------- the tutorial itself


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", TUTORIAL.read_text(), re.DOTALL)


def test_tutorial_works_on_the_readers_files_only() -> None:
    """Every command the tutorial runs names the reader's files, never the repository's formulas
    or tests (the docs runner gives a page a copy of formulas/: the tutorial must not use it)."""
    from tests.docs_runner import blocks

    commands = [
        line[2:]
        for block in blocks(TUTORIAL.read_text())
        if block.skip is None and block.lang in ("console", "bash")
        for line in block.text.splitlines()
        if line.startswith("$ ") or block.lang == "bash"
    ]
    assert any("calibrate" in c for c in commands) and any(" plan " in c for c in commands)
    for command in commands:
        assert "formulas/" not in command and "formulas.json" not in command, command
        assert "tests/" not in command, command
    files = {b.file for b in blocks(TUTORIAL.read_text()) if b.file}
    assert {"my_model.wf", "test_my_model.py", "my_sd.wf", "my_sd_pipeline.py"} <= files


def test_tutorial_formula_compiles_and_evaluates_as_shown() -> None:
    text = next(block for block in _blocks("wf") if "pipeline my_model" in block)
    model = load_text(text, "my_model.wf")["my_model"]
    values = model.evaluate(steps=4, frames=17)
    assert (
        values["DenoisingStage"].iterations,
        values["DenoisingStage"].memory,
        values["DenoisingStage"].time,
    ) == (4, 7800, 15600)
    assert values["DecodingStage"].iterations == 5
    half = dslc.compiler.compile_text(
        text.replace("iterations = steps\n", "iterations = steps / 2\n"), "half.wf"
    )
    assert [d.code for d in half.errors] == ["non-integer"]
