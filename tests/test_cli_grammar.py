"""One grammar for every `dslc` command: the same option name means the same thing everywhere,
every command prints JSON with --json, and the global options work after the command too.

The --help goldens are regenerated (then reviewed by eye) with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/test_cli_grammar.py -k help`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from dslc.cli import cli
from dslc.cli_support import POINT_METAVAR, assignments

HELP_GOLDEN = Path(__file__).resolve().parent / "golden" / "help"

#: Names a command must not use because another name says the same thing (alias -> the name).
SYNONYMS = {
    "--format": "--json",
    "--output-format": "--json",
    "--override": "--set",
    "--param": "--set",
    "--capacity": "--device-memory",
    "--memory": "--device-memory",
    "--no-color": "--color",
    "--columns": "--width",
    "--silent": "--quiet",
    "--source": "--formulas",
    "--out": "--output",
}


def commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    found = {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}
    return {name: command for name, command in found.items() if command is not None}


def visible_options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and not p.hidden]


def signature(option: click.Option) -> tuple[object, ...]:
    """What an option name promises: its value's spelling and kind (a path's metavar names the
    kind of file a command writes or reads, which may differ: OUT.json, DRAFT.wf)."""
    return (
        None if isinstance(option.type, click.Path) else option.metavar,
        type(option.type).__name__,
        option.is_flag,
        option.multiple,
    )


def test_every_command_is_walked() -> None:
    assert set(commands()) >= {"build", "calibrate", "check", "eval", "explain", "fmt", "list"}
    assert "plan" in commands()


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_takes_json_and_the_global_options(name: str) -> None:
    names = {opt for o in visible_options(commands()[name]) for opt in o.opts}
    missing = {"--json", "--color", "--width", "--quiet"} - names
    assert not missing, f"dslc {name} lacks {sorted(missing)}"


def test_the_same_name_means_the_same_thing_in_every_command() -> None:
    seen: dict[str, tuple[str, tuple[object, ...]]] = {}
    clashes = []
    for name, command in commands().items():
        for option in visible_options(command):
            for opt in option.opts:
                if opt in seen and seen[opt][1] != signature(option):
                    clashes.append(
                        f"{opt}: dslc {seen[opt][0]} {seen[opt][1]} vs dslc {name} "
                        f"{signature(option)}"
                    )
                seen.setdefault(opt, (name, signature(option)))
    assert not clashes, "\n".join(clashes)


def test_no_command_uses_another_name_for_an_option() -> None:
    found = [
        f"dslc {name} {opt} (say {SYNONYMS[opt]})"
        for name, command in commands().items()
        for option in visible_options(command)
        for opt in option.opts
        if opt in SYNONYMS
    ]
    assert not found, found


def test_every_point_option_takes_the_comma_and_the_repeated_form() -> None:
    points = [
        (name, option)
        for name, command in commands().items()
        for option in visible_options(command)
        if "NAME=VALUE" in str(option.metavar)
    ]
    assert {(n, o.name) for n, o in points} >= {
        ("eval", "overrides"),
        ("explain", "probe"),
        ("explain", "target"),
        ("calibrate", "probe"),
        ("calibrate", "target"),
        ("plan", "targets"),
    }
    ctx = click.Context(cli)
    for name, option in points:
        assert option.metavar == POINT_METAVAR and option.multiple, (name, option.name)
        assert option.callback is not None, (name, option.name)
        comma = option.callback(ctx, option, ["steps=4,frames=17"])
        repeated = option.callback(ctx, option, ["steps=4", "frames=17"])
        expected = assignments(ctx, option, ["steps=4", "frames=17"])
        if option.name == "targets":  # plan: each occurrence is a shape of its own
            assert comma == [expected] and repeated == [{"steps": 4}, {"frames": 17}]
        else:
            assert comma == repeated == expected, (name, option.name)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_global_options_work_after_the_command_too() -> None:
    args = ("eval", "formulas/", "wan2_2_t2v_a14b", "--set", "steps=4,frames=17")
    before = run("--width", "40", *args)
    after = run(*args, "--width", "40")
    assert before == after and before[0] == 0
    assert max(len(line) for line in before[1].splitlines()) <= 40
    assert run(*args, "--width", "0")[1] != before[1]


def test_check_json_and_its_deprecated_spelling_agree() -> None:
    assert run("check", "--json", "formulas/") == run("check", "--format", "json", "formulas/")


def test_check_and_list_default_to_the_repositorys_formulas() -> None:
    status, _, err = run("check")
    assert status == 0 and err.startswith("ok: ") and "pipelines in" in err
    status, out, _ = run("list", "--json")
    assert status == 0 and '"wan2_2_t2v_a14b"' in out


def test_explain_takes_a_target_as_calibrate_does() -> None:
    status, out, _ = run(
        "explain",
        "formulas/",
        "flux1_dev",
        "--probe",
        "steps=2,height=256,width=256",
        "--target",
        "steps=8",
        "--json",
    )
    assert status == 0
    import json

    doc = json.loads(out)
    assert doc["target"]["steps"] == 8 and doc["probe"]["steps"] == 2
    assert doc["probe"]["height"] == 256 and doc["target"]["height"] == 1024
    iterations = doc["stages"]["DenoisingStage"]["iterations"]
    assert (iterations["probe"], iterations["target"]) == (2, 8)


@pytest.mark.parametrize("name", ["", *sorted(commands())])
def test_help_golden(name: str) -> None:
    args = [name, "--help"] if name else ["--help"]
    result = CliRunner().invoke(cli, args, terminal_width=100, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    path = HELP_GOLDEN / f"{name or 'dslc'}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(result.output)
    assert path.exists(), f"missing {path}; run with UPDATE_GOLDEN=1 and review it"
    assert result.output == path.read_text()


def test_help_text_says_what_the_command_does() -> None:
    _, top, _ = run("--help")
    assert "calibrate" in top.split("Workflow:")[1] and "plan" in top.split("Workflow:")[1]
    assert "..." not in top.split("Commands:")[1].split("Examples:")[0]  # no summary cut off
    _, plan_help, _ = run("plan", "--help")
    assert "--verify" not in plan_help and "runs runs" not in plan_help


def test_quiet_drops_progress_and_notes_wherever_it_is_given() -> None:
    from calibration.cli.show import progress, wrote
    from dslc.cli_support import ui

    @click.command()
    def probe_command() -> None:
        with progress("calibrate") as tick:
            assert (tick is None) == ui().quiet
            if tick is not None:
                tick(1, 2, "probe")
        wrote(Path("x.json"), "a file")

    from dslc.cli_globals import with_global_options

    command = with_global_options(probe_command)
    loud = CliRunner().invoke(command, [])
    assert re.fullmatch(
        r"calibrate \[1/2\] \d+:\d\d probe\nwrote x\.json \(a file\)\n", loud.stderr
    )
    quiet = CliRunner().invoke(command, ["--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
