"""`dslc infer` on a pipeline whose call misbehaves (issue 33): one that raises at some sizes, one
that exits the interpreter, one that hangs at some sizes. Real runs of the tiny SD 1.5 on the
CPU (tests/calibration/infer/hostile_pipelines.py), on a two-param skeleton from a small base."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dslc.cli import cli

pytest.importorskip("diffusers")

HERE = Path(__file__).resolve().parent
TINY = str(HERE / "data" / "tiny.wf")
PIPES = HERE / "hostile_pipelines.py"
BASE = ("--base", "steps=1,height=16")


def infer(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["infer", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow
def test_a_call_that_fails_at_some_sizes_is_an_open_item(tmp_path):
    draft = tmp_path / "draft.wf"
    code, _, err = infer(
        "--pipeline", f"{PIPES}:tall_raising", "--params", TINY, *BASE, "-o", str(draft),
        "--strict",
    )  # fmt: skip
    assert code == 5, err
    assert "runs failed (RuntimeError: taller than 40 pixels) at" in err
    assert "open proposal" in err and "of them failed" in err
    assert draft.exists()  # the sizes that ran still draft the stages


@pytest.mark.slow
def test_a_call_that_hangs_at_some_sizes_fails_those_sizes():
    code, out, err = infer(
        "--pipeline", f"{PIPES}:tall_hanging", "--params", TINY, *BASE, "--timeout", "5",
        "--json",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    tall = [s for s in report["sizes"] if s["params"]["height"] > 72]
    assert tall and all(not s["ok"] and "ran past 5 s" in s["error"] for s in tall)
    assert "RequestTimeout: the request ran past 5 s" in err  # in the open list, not only JSON


def test_a_call_that_exits_the_interpreter_is_a_failed_request(tmp_path):
    draft = tmp_path / "draft.wf"
    code, out, err = infer(
        "--pipeline", f"{PIPES}:exiting", "--params", TINY, *BASE, "-o", str(draft)
    )
    assert code == 1 and "the pipeline fails at steps=1,height=16: SystemExit" in err, err
    assert not draft.exists() and not out
