"""Messages a newcomer met that misled (issue 43), each as a golden CLI output.

Regenerate (then review every change by eye) with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/calibration/cli/test_messages.py`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.report import document
from calibration.calibrate.run import Calibration, load_pipeline
from calibration.calibrate.verdict import OVER_PREDICTION, over_prediction, verdict
from calibration.cli.show import warn
from calibration.core.shapes import Shapes
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
    Path("factory.py").write_text("def build(seed):\n    return None\n")  # never called
    name = ["--name", "draft"] if named else []
    memory = ["--device-memory", "8GiB"] if command == "plan" else []
    pipeline = ["--pipeline", "factory.py:build"]
    status, err = invoke(command, "--formulas", "draft.wf", *pipeline, *name, *memory)
    check_status, _ = invoke("check", "draft.wf")
    assert status == check_status == 1, err
    assert "--name" not in err
    golden("compile-error-behind-name.txt", err)


CUSTOM_SD = Path(__file__).resolve().parents[1] / "data" / "custom_sd.wf"


#: Every progress tick of the ``exact`` calibration: (step, total, what).
TICKS: list[tuple[int, int, str]] = []


@pytest.fixture(scope="module")
def exact() -> Calibration:
    """The tiny SD 1.5 calibrated and verified: every row, the request's too, within a few %."""
    pytest.importorskip("diffusers")
    from calibration.examples import tiny_sd

    start = {"steps": 1, "height": 32, "width": 32}
    TICKS.clear()
    return calibrate_pipeline(
        tiny_sd.build, load_pipeline(CUSTOM_SD, "custom_sd"),
        Shapes(start, start, {"steps": 2, "height": 64, "width": 64}),
        call_kwargs=tiny_sd.call_kwargs, repeat=1, verify=True, time_tolerance=None,
        formula_path="custom_sd.wf", progress=lambda *tick: TICKS.append(tick),
    )  # fmt: skip


def request_times(cal: Calibration, factor: float) -> Calibration:
    """``cal`` with the request row's predicted peak and bound ``factor`` times as large (the
    issue's pipeline: every phase exact, the request scaled from a peak that held other things)."""
    peak = cal.estimate.request_peak
    assert peak.raw_bytes is not None and peak.bound_bytes is not None
    scaled = attrs.evolve(
        peak, raw_bytes=int(peak.raw_bytes * factor), bound_bytes=int(peak.bound_bytes * factor)
    )
    return attrs.evolve(cal, estimate=attrs.evolve(cal.estimate, request_peak=scaled))


def test_an_exact_request_row_is_no_note(exact: Calibration) -> None:
    error = exact.request_peak().error
    assert error is not None and abs(error) < OVER_PREDICTION
    assert over_prediction(exact) is None
    assert "note[request-over-predicted]" not in verdict(exact).findings


def test_a_request_row_twice_its_measured_peak_is_a_note_not_no_finding(
    exact: Calibration, capsys: pytest.CaptureFixture[str]
) -> None:
    over = request_times(exact, 2.17)
    judged = verdict(over)
    assert judged.holds and judged.status == verdict(exact).status  # safe: a note, no failure
    assert "no finding to act on" not in judged.line
    assert "1 note: the request's peak is predicted +11" in judged.findings, judged.findings
    verdict_part = document(over)["verdict"]
    assert isinstance(verdict_part, dict) and verdict_part["findings"] == judged.findings
    warn(over)
    notes = [line for line in capsys.readouterr().err.splitlines() if "over-predicted" in line]
    assert len(notes) == 1 and "the request row predicts" in notes[0]
    golden("request-over-predicted.txt", f"{judged.findings}\n{notes[0]}\n")
    assert over_prediction(request_times(exact, 1.2)) is None  # within the tolerance


def test_a_factory_module_in_the_current_folder_imports(tmp_path, monkeypatch) -> None:
    from calibration.core.factory import load_factory

    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "cwd_factory_43", raising=False)
    Path("cwd_factory_43.py").write_text("def build(seed):\n    return seed\n")
    path = list(sys.path)
    factory = load_factory("cwd_factory_43:build")
    assert factory.spec == "cwd_factory_43:build"
    assert sys.path == path  # the folder was first for the import only


def test_a_misspelt_factory_says_did_you_mean(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "cwd_factory_43b", raising=False)
    Path("draft.wf").write_text(TYPO.replace("= step\n", "= steps\n"))
    Path("cwd_factory_43b.py").write_text("def build(seed):\n    return seed\n")
    pipeline = ["--pipeline", "cwd_factory_43b:biuld"]
    status, err = invoke("calibrate", "--formulas", "draft.wf", *pipeline)
    assert status == 1
    golden("factory-did-you-mean.txt", err)


@pytest.mark.parametrize(
    "command",
    [
        ["eval", "formulas/", "flux1_dev", "--set", "height=60"],
        ["calibrate", "--example", "flux", "--target", "height=60"],
        ["plan", "--example", "flux", "--target", "height=60", "--device-memory", "8GiB"],
    ],
    ids=["eval", "calibrate", "plan"],
)
def test_an_inadmissible_target_names_the_nearest_admissible_values(command, monkeypatch):
    monkeypatch.chdir(GOLDEN.parents[1].parent)  # the repository: formulas/
    status, err = invoke(*command)
    assert status == 1, err
    assert "(nearest admissible: height = 48 or 64)" in err
    golden(f"inadmissible-{command[0]}.txt", err)


def test_infer_with_json_and_output_says_what_it_wrote(tmp_path, monkeypatch) -> None:
    pytest.importorskip("diffusers")
    root = GOLDEN.parents[1].parent
    monkeypatch.chdir(tmp_path)
    pipeline = str(root / "tests" / "calibration" / "custom_pipeline.py") + ":build"
    skeleton = str(root / "tests" / "calibration" / "infer" / "data" / "tiny.wf")
    result = CliRunner().invoke(
        cli,
        ["infer", "--pipeline", pipeline, "--params", skeleton, "--base", "steps=1,height=16"]
        + ["-o", "draft.wf", "--json"],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["pipeline"] == "tiny"  # stdout: the report alone
    wrote = [line for line in result.stderr.splitlines() if line.startswith("wrote ")]
    assert Path("draft.wf").read_text().startswith("# ")
    sizes = len(json.loads(result.stdout)["sizes"])  # a loaded clock may add a size for time
    assert f"from {sizes} sizes" in "\n".join(wrote)
    golden(
        "infer-json-wrote.txt", re.sub(r"from \d+ sizes", "from N sizes", "\n".join(wrote)) + "\n"
    )


def test_quiet_drops_the_notes_and_keeps_the_warnings(
    exact: Calibration, capsys: pytest.CaptureFixture[str]
) -> None:
    import click

    from dslc.cli_ui import Ui

    over = request_times(exact, 2.17)  # a note[request-over-predicted]
    for quiet in (False, True):
        with click.Context(click.Command("calibrate"), obj=Ui(quiet=quiet)):
            warn(attrs.evolve(over, unobserved=("text_encoder",)))  # and a warning
        err = capsys.readouterr().err
        assert ("note[request-over-predicted]" in err) is not quiet, err
        assert "warning[unobserved-component]" in err


def test_the_progress_total_is_known_up_front_and_never_grows(exact: Calibration) -> None:
    counted = [(step, total) for step, total, _ in TICKS if step > 0]
    assert len({total for _, total in counted}) == 1, counted  # one total, from the first step
    steps = [step for step, _ in counted]
    assert steps == sorted(steps) and steps[-1] == counted[0][1]  # finished at it, never past
    added = [why for why in (e.reason for e in exact.extras) if "determining" not in why]
    assert added, exact.extras  # sizes were added after the first round: the old total grew


def test_progress_lines_name_the_command_the_step_elapsed_and_left() -> None:
    from calibration.cli.show import progress_line

    ticks = [
        (0, 1, "building the pipeline", 0.4, 0.0),
        (1, 12, "warmup steps=1", 2.0, 0.0),
        (2, 12, "probe steps=1", 4.0, 2.0),
        (3, 12, "probe 2 steps=2", 14.0, 12.0),
        (12, 12, "done", 3725.0, 3723.0),
    ]
    lines = [progress_line("plan", *tick) for tick in ticks]
    assert lines[3] == "plan [3/12] 0:14, ~1:00 left probe 2 steps=2"  # 6 s a step, 10 to go
    golden("progress-lines.txt", "\n".join(lines) + "\n")


def test_the_main_output_says_what_runs_why_each_term_and_what_next(
    exact: Calibration, capsys: pytest.CaptureFixture[str]
) -> None:
    import click

    from calibration.cli.guide import LEGEND, headline, next_line
    from calibration.cli.show import show
    from dslc.cli_ui import Ui

    shown: dict[tuple[bool, str], list[str]] = {}
    for dropped in (False, True):
        for save in (None, Path("cal.json")):
            with click.Context(click.Command("calibrate"), obj=Ui(quiet=dropped)):
                show(exact, None, save=save)
            shown[dropped, str(save)] = capsys.readouterr().out.splitlines()
    loud, saved, quiet = shown[False, "None"], shown[False, "cal.json"], shown[True, "None"]
    assert loud[0] == quiet[0] == headline(exact)
    assert "the formulas' default workload" not in loud[0] and "as asked" in loud[0]
    assert loud[-1] == next_line(None) and saved[-1] == next_line(Path("cal.json"))
    assert saved[-1].startswith("next: dslc plan --calibration cal.json --device-memory ")
    assert quiet[-1].startswith("verdict: ") and set(LEGEND).isdisjoint(quiet)
    assert [line for line in loud if line in LEGEND] == list(LEGEND)  # each term once
    golden("calibrate-guide.txt", "\n".join([loud[0], *LEGEND, loud[-1], saved[-1]]) + "\n")


def test_explain_gives_each_term_of_the_legend_in_full_under_the_report(
    exact: Calibration, capsys: pytest.CaptureFixture[str]
) -> None:
    """`calibrate --explain`: every term the legend names explained at length after the report,
    --quiet or not (asked for by name)."""
    import click

    from calibration.cli.calibrate import calibrate
    from calibration.cli.guide import EXPLAINED, LEGEND, explained
    from calibration.cli.show import show
    from dslc.cli_ui import Ui

    assert "--explain" in {o for p in calibrate.params for o in p.opts}
    for quiet in (False, True):
        with click.Context(click.Command("calibrate"), obj=Ui(quiet=quiet)):
            show(exact, None, explain=True)
        out = capsys.readouterr().out.splitlines()
        assert out[-len(explained()) :] == explained()
        verdict = next(k for k, line in enumerate(out) if line.startswith("verdict: "))
        assert verdict < len(out) - len(explained())  # under the report
    legend = " ".join(LEGEND)
    for term, text in EXPLAINED:
        assert all(word.strip() in legend for word in term.split(",")), term
        assert len(text) > 150, term  # in full, not the legend's line again
    golden("calibrate-explain.txt", "\n".join(explained()) + "\n")
