"""Messages a newcomer met that misled (issue 43), each as a golden CLI output.

Regenerate (then review every change by eye) with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/calibration/cli/test_messages.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dslc.cli import cli

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "messages"

TYPO = """\
pipeline draft {
    param steps: int = 4 in [1, 100]
    param height: int = 64 in [16, 512]
    stage DenoisingStage {
        iterations = step
        memory ~ [height]
    }
}
"""


def invoke(*args: str) -> tuple[int, str]:
    """`dslc ARGS` at 100 columns: its exit status and what it wrote to stderr."""
    result = CliRunner().invoke(cli, list(args), terminal_width=100)
    return result.exit_code, result.stderr


def golden(name: str, text: str) -> None:
    """``text`` is exactly the golden file ``name`` (written anew under UPDATE_GOLDEN)."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing {path}; run with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text()


@pytest.mark.parametrize("named", [False, True], ids=["without --name", "with --name"])
@pytest.mark.parametrize("command", ["calibrate", "plan"])
def test_a_compile_error_is_shown_not_a_hint_about_name(tmp_path, monkeypatch, command, named):
    monkeypatch.chdir(tmp_path)
    Path("draft.wf").write_text(TYPO)
    name = ["--name", "draft"] if named else []
    memory = ["--device-memory", "8GiB"] if command == "plan" else []
    status, err = invoke(command, "--formulas", "draft.wf", "--pipeline", "mod:fn", *name, *memory)
    check_status, _ = invoke("check", "draft.wf")
    assert status == check_status == 1, err
    assert "--name" not in err
    golden("compile-error-behind-name.txt", err)
