"""The `dslc` command line: exit codes, output formats, atomic writes, no tracebacks.

Most tests drive the click group in-process (CliRunner); a few run the installed console script
in a subprocess, as a user would. Every documented path must stay clear of the internal-error
exit (3), which `run` asserts for every invocation.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dslc import __version__
from dslc.cli import cli
from dslc.compiler import compile_paths
from dslc.diagnostics import render
from dslc.render_rich import printable, use_color
from tests.examples import LANGUAGE_EXAMPLE

DSLC = Path(sys.executable).with_name("dslc")

TYPO = """\
pipeline p {
    param steps: int = 4 in [0, 10]
    stage S { iterations = stpes - 1 }
}
"""

UNCANONICAL = "pipeline   q{param steps:int=4 in [1,10]\nstage S{iterations=steps}}\n"

# A formula the prover cannot settle (today): a warning, an error under --strict.
HARD = """\
pipeline u {
    param a: int = 3 in [0, inf]
    param b: int = 2 in [0, inf]
    stage S { memory ~ a*a*a*a - 4*a*a*a*b + 6*a*a*b*b - 4*a*b*b*b + b*b*b*b + 1 }
}
"""

RATIONAL = """\
pipeline r {
    param steps: int = 4 in [0, 10]
    stage S { iterations = steps
              memory ~ steps / 3 + 1 }
}
"""


def run(*args: str, env: dict[str, str] | None = None):
    """Invoke `dslc ARGS` in-process; no documented path may reach the internal-error exit."""
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code != 3, result.output
    assert "Traceback" not in result.output
    assert "internal error:" not in result.output
    return result


@pytest.fixture
def wan(tmp_path: Path) -> Path:
    path = tmp_path / "wan.wf"
    path.write_text(LANGUAGE_EXAMPLE)
    return path


@pytest.fixture
def typo(tmp_path: Path) -> Path:
    path = tmp_path / "typo.wf"
    path.write_text(TYPO)
    return path


def eval_json(*args: str) -> dict:
    result = run("eval", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# --- check -----------------------------------------------------------------------------------


def test_check_clean_file_exits_0_with_a_summary_on_stderr(wan: Path) -> None:
    result = run("check", str(wan))
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr.strip() == "ok: 4 pipelines in 1 file"


def test_check_prints_each_diagnostic_exactly_as_rendered(typo: Path) -> None:
    result = run("check", str(typo))
    assert result.exit_code == 1
    expected = "".join(render(d) + "\n\n" for d in compile_paths([typo]).diagnostics)
    assert result.stdout == expected  # each followed by a blank line
    first = result.stdout.splitlines()[0]
    assert first == f"{typo}:3:28: error[undefined-name]: unknown name 'stpes'"
    assert "help: did you mean 'steps'?" in result.stdout
    assert result.stderr.strip() == "1 error in 1 file"


def test_the_last_caret_line_never_runs_into_the_summary(tmp_path: Path) -> None:
    """Diagnostics on stdout, the summary on stderr, both on one terminal: the last diagnostic
    (here one with no help line, so it ends in carets) is followed by a blank line."""
    path = tmp_path / "carets.wf"
    path.write_text(
        "pipeline p {\n    stage S { iterations = qqq }\n    stage T { memory ~ zzz }\n}\n"
    )
    done = subprocess.run(
        [str(DSLC), "check", str(path)],
        check=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and lines[-1] == "2 errors in 1 file"
    assert lines[-3].endswith("^^^") and lines[-2] == ""
    assert lines.index("") == 3  # between the two diagnostics too


def test_check_json_format(typo: Path, wan: Path) -> None:
    result = run("check", "--format", "json", str(typo), str(wan))
    assert result.exit_code == 1
    (entry,) = json.loads(result.stdout)["diagnostics"]
    keys = ("severity", "code", "file", "line", "column", "end_line", "end_column")
    assert {k: entry[k] for k in keys} == {
        "severity": "error",
        "code": "undefined-name",
        "file": str(typo),
        "line": 3,
        "column": 28,
        "end_line": 3,
        "end_column": 33,
    }
    assert result.stderr.strip() == "1 error in 2 files"
    clean = run("check", "--json", str(wan))
    assert (clean.exit_code, json.loads(clean.stdout)) == (0, {"diagnostics": []})


def test_check_folder_finds_every_wf_below_it(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "one.wf").write_text(TYPO)
    (tmp_path / "a" / "b" / "two.wf").write_text(LANGUAGE_EXAMPLE)
    (tmp_path / "a" / "notes.txt").write_text("not a formula")
    result = run("check", str(tmp_path / "a"))
    assert result.exit_code == 1
    assert result.stderr.strip() == "1 error in 2 files"


def test_check_warnings_pass_unless_strict(tmp_path: Path) -> None:
    path = tmp_path / "hard.wf"
    path.write_text(HARD)
    result = run("check", str(path))
    if "warning[unproven]" not in result.stdout:
        pytest.skip("the prover now settles this formula; pick a harder one")
    assert result.exit_code == 0
    assert result.stderr.strip() == "ok: 1 pipeline in 1 file (1 warning)"
    strict = run("check", "--strict", str(path))
    assert strict.exit_code == 1
    assert "error[unproven]" in strict.stdout
    assert strict.stderr.strip() == "1 error in 1 file"


@pytest.mark.parametrize(
    "args",
    [
        ["check", "missing.wf"],  # a path that does not exist
        ["check", "--format", "xml", "x.wf"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2(args: list[str], tmp_path: Path) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert "Usage:" in result.stderr


def test_a_folder_without_wf_files_is_a_usage_error(tmp_path: Path) -> None:
    result = run("check", str(tmp_path))
    assert result.exit_code == 2
    assert "no .wf files" in result.stderr


def test_binary_junk_is_a_diagnostic_not_a_traceback(tmp_path: Path) -> None:
    junk = tmp_path / "junk.wf"
    junk.write_bytes(bytes(range(256)) * 4)
    result = run("check", str(junk))
    assert result.exit_code == 1
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"{junk}:") and "error[syntax]" in first
    assert "\x1b" not in result.output  # control characters from the file never reach the terminal


@pytest.mark.skipif(sys.platform != "linux", reason="needs a file name that is not UTF-8")
def test_an_undecodable_file_name_is_printed_safely(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    (Path(os.fsdecode(bytes(folder) + b"/b\xffd.wf"))).write_text(TYPO)
    result = run("check", str(folder))
    assert result.exit_code == 1
    assert "b\ufffdd.wf:3:28: error[undefined-name]" in result.stdout
    assert json.loads(run("check", "--format", "json", str(folder)).stdout)["diagnostics"]


def test_control_characters_in_a_source_line_are_neutralised(tmp_path: Path) -> None:
    path = tmp_path / "esc.wf"
    path.write_text(TYPO.replace("stpes - 1 }", "stpes - 1 }  # \x1b[2J\r"))
    result = run("check", str(path))
    assert result.exit_code == 1
    assert "\x1b" not in result.stdout and "\r" not in result.stdout
    assert printable("a\x1b[2Jb\tc") == "a\ufffd[2Jb\tc"


# --- build -----------------------------------------------------------------------------------


def test_build_writes_a_loadable_artifact(wan: Path, tmp_path: Path) -> None:
    from runtime import load_formulas

    out = tmp_path / "build" / "formulas.json"
    result = run("build", str(wan), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"wrote {out}: 4 pipelines from 1 file"
    book = load_formulas(out)
    assert list(book) == ["wan2_2_t2v_a14b", "wan2_2_i2v_a14b", "wan2_1_t2v_dmd", "minimax_h3"]
    assert book["minimax_h3"].iterations("DenoisingStage") == 49
    assert json.loads(out.read_text())["format_version"] == 1
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask  # as any new file, not mkstemp's 0600
    assert [p.name for p in out.parent.iterdir()] == ["formulas.json"]  # no temporary left behind


def test_a_failed_build_leaves_the_existing_artifact_untouched(
    wan: Path, typo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "formulas.json"
    assert run("build", str(wan), "-o", str(out)).exit_code == 0
    before = (out.read_bytes(), out.stat().st_mtime_ns)
    result = run("build", str(wan), str(typo), "-o", str(out))
    assert result.exit_code == 1
    assert "error[undefined-name]" in result.stderr
    assert (out.read_bytes(), out.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["formulas.json", "typo.wf", "wan.wf"]


def test_build_needs_an_output(wan: Path) -> None:
    assert run("build", str(wan)).exit_code == 2


def test_build_into_a_folder_is_a_usage_error(wan: Path, tmp_path: Path) -> None:
    assert run("build", str(wan), "-o", str(tmp_path)).exit_code == 2


# --- eval ------------------------------------------------------------------------------------


def test_eval_json_at_the_default_workload(wan: Path) -> None:
    doc = eval_json(str(wan), "wan2_2_t2v_a14b")
    assert doc["pipeline"] == "wan2_2_t2v_a14b"
    assert doc["params"] == {"steps": 40, "frames": 81, "height": 720, "width": 1280, "cfg": True}
    assert list(doc["stages"]) == ["TextEncodingStage", "DenoisingStage", "DecodingStage"]
    assert doc["stages"]["DenoisingStage"] == {"iterations": 40, "memory": 75600, "time": 151200}
    assert doc["stages"]["TextEncodingStage"] == {"iterations": 1, "memory": 1, "time": 1}


def test_eval_json_with_overrides(wan: Path) -> None:
    doc = eval_json(str(wan), "wan2_2_t2v_a14b", "--set", "steps=4", "--set", "cfg=false")
    assert doc["params"]["steps"] == 4 and doc["params"]["cfg"] is False
    assert doc["stages"]["DenoisingStage"] == {"iterations": 4, "memory": 75600, "time": 75600}

    def denoising(*args: str) -> int:
        return eval_json(str(wan), *args)["stages"]["DenoisingStage"]["iterations"]

    assert denoising("minimax_h3") == 49
    assert denoising("minimax_h3", "--set", "steps=1_000") == 999
    assert denoising("wan2_1_t2v_dmd", "--set", "steps=50") == 4  # a fixed distilled schedule


def test_eval_a_non_integral_measure_is_a_float(tmp_path: Path) -> None:
    path = tmp_path / "r.wf"
    path.write_text(RATIONAL)
    stage = eval_json(str(path), "r")["stages"]["S"]
    assert stage == {"iterations": 4, "memory": pytest.approx(7 / 3), "time": 1}
    assert isinstance(stage["memory"], float) and isinstance(stage["time"], int)


def test_eval_an_artifact_and_the_sources_agree(wan: Path, tmp_path: Path) -> None:
    out = tmp_path / "formulas.json"
    assert run("build", str(wan), "-o", str(out)).exit_code == 0
    for name in ("wan2_2_i2v_a14b", "minimax_h3"):
        from_sources = eval_json(str(wan), name, "--set", "steps=7")
        assert eval_json(str(out), name, "--set", "steps=7") == from_sources


def test_eval_prints_a_table_and_the_params_used(wan: Path) -> None:
    result = run("eval", str(wan), "wan2_2_t2v_a14b", "--set", "steps=4")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "wan2_2_t2v_a14b"
    assert lines[1] == (
        "params: steps = 4 (set), frames = 81, height = 720, width = 1280, cfg = true"
    )
    assert lines[2].split() == ["stage", "iterations", "memory", "time"]
    assert lines[4].split() == ["DenoisingStage", "4", "75600", "151200"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no pipeline 'nope'"),
        (["minimax_h3", "--set", "stepz=3"], "no param 'stepz'; did you mean 'steps'?"),
        (["minimax_h3", "--set", "steps=true"], "takes an int"),
        (["wan2_2_t2v_a14b", "--set", "cfg=1"], "takes a bool"),
        (["minimax_h3", "--set", "steps=0"], "steps = 0 is outside [1, 1000]"),
        (["wan2_2_t2v_a14b", "--set", "frames=80"], "frames = 80 violates `frames % 4 == 1`"),
    ],
)
def test_eval_runtime_errors_are_one_line_and_exit_1(
    wan: Path, args: list[str], message: str
) -> None:
    result = run("eval", str(wan), *args)
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and message in line


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("steps=x", "steps: 'x' is neither an integer nor true/false"),
        ("steps=1.5", "steps: '1.5'"),
        ("steps=True", "steps: 'True'"),
        ("steps", "expected NAME=VALUE"),
        ("=4", "expected NAME=VALUE"),
        ("steps=1" + "0" * 30, "steps: more than 30 digits"),
    ],
)
def test_eval_malformed_set_is_a_usage_error(wan: Path, value: str, message: str) -> None:
    result = run("eval", str(wan), "minimax_h3", "--set", value)
    assert result.exit_code == 2
    assert message in result.stderr


def test_eval_prints_huge_values_bounded_and_json_exactly_under_the_limit(tmp_path: Path) -> None:
    """Python's digit guard stays on: people see leading digits and a digit count; --json prints
    integers exactly up to 4,300 digits and refuses larger ones with a clear message."""
    path = tmp_path / "big.wf"
    path.write_text(
        "pipeline big {\n  param n: int = 2 in [0, 10 ** 30]\n"
        "  stage S { memory ~ (n ** 64) ** 4; time ~ n ** 64 }\n}\n"
    )
    assert sys.get_int_max_str_digits() in (0, 4300)
    result = run("eval", str(path), "big", "--set", f"n={10**29}", "--json")
    assert result.exit_code == 1
    assert "7,425 digits" in result.stderr and "at most 4,300 digits" in result.stderr
    human = run("eval", str(path), "big", "--set", f"n={10**29}")
    assert human.exit_code == 0
    assert "1000000...(7,425 digits)" in human.stdout
    assert "1000000...(1,857 digits)" in human.stdout
    small = run("eval", str(path), "big", "--set", f"n={10**4}", "--json")
    assert small.exit_code == 0
    assert '"time": 1' + "0" * 256 + "\n" in small.stdout  # (10**4)**64, every digit


def test_eval_reports_compile_errors(typo: Path) -> None:
    result = run("eval", str(typo), "p")
    assert result.exit_code == 1
    assert "error[undefined-name]" in result.stderr and result.stdout == ""


def test_eval_rejects_a_malformed_artifact(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "workload-formulas", "format_version": 99}')
    result = run("eval", str(bad), "x")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: invalid workload-formulas artifact")
    bad.write_bytes(b"\xff\x00junk")
    assert run("eval", str(bad), "x").exit_code == 1


# --- fmt -------------------------------------------------------------------------------------


def test_fmt_check_then_fmt_then_check_again(tmp_path: Path) -> None:
    path = tmp_path / "q.wf"
    path.write_text(UNCANONICAL)
    path.chmod(0o640)
    result = run("fmt", "--check", str(tmp_path))
    assert result.exit_code == 1
    assert result.stdout.strip() == f"would reformat {path}"
    assert path.read_text() == UNCANONICAL
    result = run("fmt", str(path))
    assert result.exit_code == 0
    assert result.stdout.strip() == f"reformatted {path}"
    assert path.read_text() != UNCANONICAL
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the file keeps its permissions
    assert run("fmt", "--check", str(path)).exit_code == 0
    assert run("check", str(path)).exit_code == 0


def test_fmt_leaves_a_file_with_syntax_errors_alone(tmp_path: Path, wan: Path) -> None:
    broken = tmp_path / "broken.wf"
    broken.write_text("pipeline p {\n  param steps: int = \n}\n" + UNCANONICAL)
    result = run("fmt", str(broken), str(wan))
    assert result.exit_code == 1
    assert "error[syntax]" in result.stderr
    assert broken.read_text().endswith(UNCANONICAL)
    assert "with errors" in result.stderr


def test_fmt_check_on_canonical_files_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "q.wf"
    path.write_text(UNCANONICAL)
    run("fmt", str(path))
    result = run("fmt", "--check", str(path))
    assert (result.exit_code, result.stdout) == (0, "")


# --- explain ---------------------------------------------------------------------------------


def test_explain_shows_the_ratio_of_target_to_probe(wan: Path) -> None:
    result = run("explain", str(wan), "wan2_2_t2v_a14b", "--probe", "steps=4")
    assert result.exit_code == 0, result.output
    (row,) = [
        line
        for line in result.stdout.splitlines()
        if line.startswith("DenoisingStage") and "iterations" in line
    ]
    assert row.split() == ["DenoisingStage", "iterations", "4", "40", "10", "=", "steps"]
    assert "if cfg then 2 else 1" in result.stdout


def test_explain_json(wan: Path) -> None:
    result = run(
        "explain",
        str(wan),
        "wan2_2_t2v_a14b",
        "--probe",
        "steps=4",
        "--probe",
        "frames=21",
        "--json",
    )
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["probe"]["steps"] == 4 and doc["target"]["steps"] == 40
    assert doc["stages"]["DenoisingStage"]["iterations"] == {
        "formula": "steps",
        "declared": True,
        "probe": 4,
        "target": 40,
        "ratio": 10,
    }
    memory = doc["stages"]["DenoisingStage"]["memory"]
    assert (memory["probe"], memory["target"], memory["ratio"]) == (6 * 45 * 80, 21 * 45 * 80, 3.5)
    assert doc["stages"]["DecodingStage"]["iterations"]["declared"] is False


def test_explain_a_zero_probe_has_no_ratio(tmp_path: Path) -> None:
    path = tmp_path / "r.wf"
    path.write_text(RATIONAL)
    doc = json.loads(run("explain", str(path), "r", "--probe", "steps=0", "--json").stdout)
    assert doc["stages"]["S"]["iterations"]["ratio"] is None


def test_explain_needs_sources_and_a_known_pipeline(wan: Path, tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    run("build", str(wan), "-o", str(out))
    assert run("explain", str(out), "minimax_h3").exit_code == 2
    assert run("explain", str(wan), "nope").exit_code == 1
    assert run("explain", str(wan), "minimax_h3", "--probe", "steps=0").exit_code == 1


# --- help, version, colour, internal errors ----------------------------------------------------


def test_help_and_version() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in ("check", "build", "eval", "fmt", "explain"):
        assert f"dslc {command}" in result.stdout
    assert run("--version").stdout.strip() == f"dslc, version {__version__}"
    for command in ("check", "build", "eval", "fmt", "explain"):
        assert "Example" in run(command, "--help").stdout


def test_plain_output_unless_a_terminal_or_forced(typo: Path, tmp_path: Path) -> None:
    assert "\x1b[" not in run("check", str(typo)).output
    weird = tmp_path / "[red]x[bold].wf"
    weird.write_text(TYPO)
    result = run("--color", "always", "check", str(weird))
    assert result.exit_code == 1
    assert "\x1b[" in result.stdout  # coloured...
    assert "[red]x[bold].wf" in result.stdout  # ...and user text is never taken as markup
    assert "unknown name 'stpes'" in result.stdout
    plain = run("check", str(weird)).stdout
    assert re.sub(r"\x1b\[[0-9;]*m", "", result.stdout) == plain  # colour changes nothing else


def test_use_color_respects_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(Tty()) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(Tty()) is False
    assert use_color(Tty(), "always") is True


def test_an_internal_error_is_one_line_and_exit_3(
    wan: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dslc.compiler

    def boom(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(dslc.compiler, "compile_paths", boom)
    monkeypatch.delenv("DSLC_DEBUG", raising=False)
    result = CliRunner().invoke(cli, ["check", str(wan)])
    assert result.exit_code == 3
    assert result.stderr.startswith("internal error: ZeroDivisionError: boom")
    assert "Traceback" not in result.output
    assert "please report it" in result.stderr


@pytest.mark.parametrize(
    ("missing", "code"), [("diffusers", 1), ("diffusers.pipelines", 1), ("runtime.gone", 3)]
)
def test_a_missing_dependency_is_exit_1_naming_it_and_a_missing_module_of_ours_exit_3(
    wan: Path, monkeypatch: pytest.MonkeyPatch, missing: str, code: int
) -> None:
    """A machine without diffusers (seen on a lent GPU machine) is the install's problem, named;
    a module of our own that cannot be found is a bug."""
    import dslc.compiler

    def absent(*args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    monkeypatch.setattr(dslc.compiler, "compile_paths", absent)
    monkeypatch.delenv("DSLC_DEBUG", raising=False)
    result = CliRunner().invoke(cli, ["check", str(wan)])
    assert result.exit_code == code
    assert "Traceback" not in result.output
    if code == 1:
        assert "'diffusers' is not installed" in result.stderr and "README" in result.stderr
    else:
        assert result.stderr.startswith("internal error: ModuleNotFoundError")


# --- the installed console script ------------------------------------------------------------


def script(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(DSLC), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert "Traceback" not in proc.stderr and "internal error:" not in proc.stderr
    return proc


@pytest.mark.skipif(not DSLC.exists(), reason="console script not installed")
def test_console_script_end_to_end(wan: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.wf"
    junk.write_bytes(os.urandom(512) + b"\x00\xff")
    proc = script("check", str(junk))
    assert proc.returncode == 1 and "error[syntax]" in proc.stdout
    assert script("check", str(tmp_path / "missing.wf")).returncode == 2
    proc = script("eval", str(wan), "wan2_2_t2v_a14b", "--set", "steps=4", "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["stages"]["DenoisingStage"]["iterations"] == 4
    proc = script("eval", str(wan), "minimax_h3", "--set", "steps=0")
    assert proc.returncode == 1 and proc.stderr.startswith("error: point is not admissible")
