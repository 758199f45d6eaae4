"""`dslc plan --explain` and `--plot` (issue 43): each term the plan's report uses, explained once
under it (a golden), and each phase's bytes on the device drawn against usable (the file is a
valid figure with one panel; no pixel goldens).

Regenerate the golden (then review it by eye) with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/calibration/cli/test_plan_explain.py`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.cli.guide import explained
from calibration.cli.plan_guide import PLAN_EXPLAINED
from dslc.cli import cli
from tests.calibration.cli.test_messages import golden
from tests.calibration.cli.test_plan import calibration_document

PNG = b"\x89PNG\r\n\x1a\n"


def _plan(tmp_path: Path, *more: str, memory: str = "40GiB"):
    """The plan of test_plan's calibration (a 24 GiB transformer); 1MiB: nothing fits."""
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration_document()))
    args = ["--width", "120", "plan", "--calibration", str(path), "--device-memory", memory]
    args += ["--reserve", "0"] if memory == "1MiB" else []
    return CliRunner().invoke(cli, [*args, *more], catch_exceptions=False)


def test_explain_names_each_term_of_the_report_once_under_it(tmp_path):
    plain, explain = _plan(tmp_path), _plan(tmp_path, "--explain")
    assert plain.exit_code == explain.exit_code == 0, explain.output
    lines = explain.stdout.splitlines()
    wanted = explained(terms=PLAN_EXPLAINED)
    assert lines[-len(wanted) :] == wanted  # under the report, the report itself unchanged
    assert explain.stdout.startswith(plain.stdout) and "each term" not in plain.stdout
    report = plain.stdout + _plan(tmp_path, memory="1MiB").stderr  # and when nothing fits
    for term, text in PLAN_EXPLAINED:  # a term the report shows (an unproven plan's: rare)
        words = [w.strip() for w in re.split(r"[,:]", term) if w.strip()]
        assert any(w in report for w in words) or term == "not proven the least", term
        assert len(text) > 150, term  # in full, not a legend's line
    assert len({t for t, _ in PLAN_EXPLAINED}) == len(PLAN_EXPLAINED)  # each once
    golden("plan-explain.txt", "\n".join(wanted) + "\n")


@pytest.mark.parametrize(("memory", "code"), [("40GiB", 0), ("1MiB", 1)])
def test_plot_writes_one_panel_of_every_phase(tmp_path, memory, code):
    figure = tmp_path / "plan.svg"
    result = _plan(tmp_path, "--plot", str(figure), memory=memory)
    assert result.exit_code == code, result.output
    svg = figure.read_text()
    assert svg.lstrip().startswith("<?xml") and svg.count('<g id="axes_') == 1
    phases = [p for p in ("TextEncodingStage", "DenoisingStage", "DecodingStage") if p in svg]
    # nothing fits: no bars, the reason (naming the phase that does not fit) as the title
    assert phases == (
        ["TextEncodingStage", "DenoisingStage", "DecodingStage"]
        if code == 0
        else ["TextEncodingStage"]
    )
    assert "wrote" in result.stderr


def test_plot_png_and_a_bad_format_before_anything_runs(tmp_path):
    assert _plan(tmp_path, "--plot", str(tmp_path / "plan")).exit_code == 0
    assert (tmp_path / "plan.png").read_bytes().startswith(PNG)
    bad = _plan(tmp_path, "--plot", str(tmp_path / "plan.nope"))
    assert bad.exit_code == 2 and "--plot" in bad.output and not (tmp_path / "plan.nope").exists()


def test_plot_draws_one_plan_not_the_lifecycles_nor_one_per_rank(tmp_path):
    figure = str(tmp_path / "plan.png")
    two = _plan(
        tmp_path,
        "--calibration",
        str(tmp_path / "cal.json"),
        "--device-memory",
        "40GiB",
        "--plot",
        figure,
    )
    assert two.exit_code == 2 and "--plot draws one plan" in two.output  # two ranks
    assert not (tmp_path / "plan.png").exists()
