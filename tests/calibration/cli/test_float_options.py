"""Every float option of every `dslc` command (the plugins' included) reads its number through one
type, ``dslc.cli_values.FiniteRange``: nan, inf and a number out of range are a one-line usage
error naming the option (exit 2), never exit 3 or a traceback (issue 39: `--pageable-factor nan`
reached the planner through ``click.FloatRange``)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from dslc.cli import cli
from dslc.cli_values import FiniteRange

HOSTILE = ["nan", "-nan", "inf", "-inf", "-0", "1e308", "1e309", "-1e308"]


def _commands(
    command: click.Command, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from _commands(sub, (*path, name))
    yield path, command


def _float_options() -> list[tuple[tuple[str, ...], click.Option]]:
    return [
        (path, param)
        for path, command in _commands(cli, ())
        for param in command.params
        if isinstance(param, click.Option) and isinstance(param.type, click.types.FloatParamType)
    ]


FLOATS = _float_options()


def test_the_walk_sees_every_plugin_command_and_its_float_options():
    named = {(" ".join(path), param.opts[0]) for path, param in FLOATS}
    assert {
        ("calibrate", "--margin"),
        ("calibrate", "--time-tolerance"),
        ("plan", "--pageable-factor"),
        ("plan", "--margin"),
        ("infer", "--timeout"),
    } <= named, named


@pytest.mark.parametrize(
    ("path", "param"), FLOATS, ids=[f"{' '.join(p)} {o.opts[0]}" for p, o in FLOATS]
)
def test_every_float_option_reads_through_the_finite_range(path, param):
    assert type(param.type) is FiniteRange, (path, param.opts)


def _accepts(param: click.Option, value: str) -> bool:
    try:
        number = param.type.convert(value, param, None)
    except click.BadParameter:
        return False
    assert math.isfinite(number), (param.opts, value, number)
    return True


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize(
    ("path", "param"), FLOATS, ids=[f"{' '.join(p)} {o.opts[0]}" for p, o in FLOATS]
)
def test_a_hostile_float_is_a_one_line_usage_error_naming_the_option(path, param, value):
    if _accepts(param, value):  # a valid value (-0 where 0 is in range): read as a number
        return
    option = param.opts[0]
    result = CliRunner().invoke(cli, [*path, f"{option}={value}"])
    assert isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and option in errors[0], result.output
    assert result.output.rstrip("\n").endswith(errors[0]) and "Traceback" not in result.output


def test_nan_was_let_through_by_clicks_float_range():
    """Why the type exists: click's own range compares, and nan compares false to every bound."""
    assert math.isnan(click.FloatRange(1, 1000).convert("nan", None, None))
    with pytest.raises(click.BadParameter, match="'nan' is not a finite number"):
        FiniteRange(1, 1000).convert("nan", None, None)
