"""A path holding a newline (or any character that does not print) is named on one line by every
error of `dslc calibrate`, `plan`, `infer` and `build` that names a file: as Python writes the
string (``artifact.spelling.path_text``), never split over two lines (issue 39)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.fuzzing.mutate import STOP_FACTORY
from dslc.cli import cli

NAME = "a\nb.json"
RUN = ["--pipeline", STOP_FACTORY, "--name", "custom_sd"]
FORMULAS = str(Path(__file__).resolve().parents[1] / "data" / "custom_sd.wf")


def _cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """Each command line, and the one-line error it ends with (``{tmp}`` the test's folder)."""
    folder_file = tmp / "file"
    folder_file.write_text("")
    (tmp / NAME).write_text("[]")
    shown = repr(str(tmp / NAME))
    return {
        "a plan file": (
            ["calibrate", "--calibrate-offload", f"plan:{tmp / NAME}"],
            f"error: plan file {shown}: a plan document is a JSON object; ",
        ),
        "a missing plan file": (
            ["calibrate", "--calibrate-offload", f"plan:{tmp / 'x' / NAME}"],
            f"error: plan file {str(tmp / 'x' / NAME)!r}: No such file or directory; ",
        ),
        "a calibration document": (
            ["plan", "--calibration", str(tmp / NAME), "--device-memory", "24GiB"],
            f"error: calibration document {shown}: a calibration document is a JSON object",
        ),
        "an unwritable --save": (
            ["calibrate", *RUN, "--formulas", FORMULAS, "--save", str(folder_file / NAME)],
            f"error: --save: cannot write {str(folder_file / NAME)!r}: ",
        ),
        "a missing --pipeline file": (
            ["calibrate", "--pipeline", f"{tmp / NAME}.py:build", "--name", "custom_sd"],
            f"error: --pipeline: no file {str(tmp / NAME) + '.py'!r}",
        ),
        "a missing --formulas": (
            ["calibrate", "--example", "flux", "--formulas", str(tmp / "x" / NAME)],
            f"error: no formula file or folder {str(tmp / 'x' / NAME)!r}",
        ),
        "an unwritable build -o": (
            ["build", FORMULAS, "-o", str(folder_file / NAME)],
            f"error: cannot write {str(folder_file / NAME)!r}: ",
        ),
    }


CASES = [
    "a plan file",
    "a missing plan file",
    "a calibration document",
    "an unwritable --save",
    "a missing --pipeline file",
    "a missing --formulas",
    "an unwritable build -o",
]


@pytest.mark.parametrize("case", CASES)
def test_an_error_naming_a_hostile_path_is_one_line(tmp_path, case):
    args, message = _cases(tmp_path)[case]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(message), result.stderr
    assert "b.json" in errors[0] and "\nb.json" not in result.stderr
