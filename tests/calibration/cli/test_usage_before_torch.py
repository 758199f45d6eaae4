"""A usage error or the help of `dslc calibrate`, `plan`, `infer` and `serve` never imports torch or
diffusers (issue 39: `dslc calibrate --bogus` took 2-3 s and 225 MiB because the command's help
listed the examples' demo shapes, and four example modules imported torch at module level). Each
case runs in a fresh interpreter, so nothing an earlier test imported hides an import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

#: Invoke `dslc ARGS...` through click in this interpreter; print the exit and the heavy modules.
INVOKE = """
import json, sys
from click.testing import CliRunner
from dslc.cli import cli
result = CliRunner().invoke(cli, sys.argv[1:])
heavy = sorted({"torch", "diffusers", "transformers"} & set(sys.modules))
print(json.dumps([result.exit_code, heavy, result.output[-400:]]))
"""

CASES = [
    ["calibrate", "--bogus"],
    ["calibrate", "--help"],
    ["calibrate", "--margin", "nan"],
    ["calibrate", "--example", "nope"],
    ["plan", "--bogus"],
    ["plan", "--help"],
    ["plan", "--device-memory", "1GiB", "--pageable-factor", "nan"],
    ["infer", "--bogus"],
    ["infer", "--help"],
    ["serve", "--bogus"],
    ["serve", "--help"],
    ["serve"],
    ["serve", "--device-capacity", "1GiB", "--reserve", "2GiB"],
    ["serve", "--request-timeout", "nan"],
    ["--help"],
]


@pytest.mark.parametrize("args", CASES, ids=" ".join)
def test_a_usage_error_or_help_imports_no_torch(args):
    done = subprocess.run(
        [sys.executable, "-c", INVOKE, *args], check=False, capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    code, heavy, output = json.loads(done.stdout)
    assert code == (0 if "--help" in args else 2), output
    assert heavy == [], (heavy, output)


def test_the_help_still_lists_each_examples_demo_shapes():
    from calibration.cli.calibrate import EPILOG
    from calibration.examples import EXAMPLES

    for name in EXAMPLES:
        assert f"  {name:6} warmup " in EPILOG, name
