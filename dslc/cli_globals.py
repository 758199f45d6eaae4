"""The options every `dslc` command takes, before or after its name: --color, --width, --quiet.

`dslc --width 40 eval ...` and `dslc eval ... --width 40` mean the same: each option updates the
invocation's `Ui` when it is given, wherever it is given (the later one wins).
"""

from __future__ import annotations

from typing import Any

import click

from dslc.cli_ui import Ui
from dslc.render_rich import COLOR_MODES, MAX_TABLE_WIDTH

#: The names of the global options (a command of its own must not reuse them).
GLOBAL_NAMES = ("color", "width", "quiet")


def _update(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """Apply a global option to the invocation's Ui, only when it was given."""
    if value is None or value is False:
        return
    found = ctx.find_object(Ui)
    old = found if found is not None else Ui()
    settings = {"color": old.mode, "width": old.width, "quiet": old.quiet, str(param.name): value}
    new = Ui(settings["color"], settings["width"], settings["quiet"])
    ctx.find_root().obj = new  # one Ui per invocation: contexts made later inherit it
    ctx.obj = new


def global_options() -> list[click.Option]:
    """Fresh --color, --width and --quiet options (one set per command)."""
    return [
        click.Option(
            ["--color"],
            type=click.Choice(COLOR_MODES),
            default=None,
            expose_value=False,
            callback=_update,
            help="Colour the output: on a terminal (auto, the default), always, or never.",
        ),
        click.Option(
            ["--width"],
            type=click.IntRange(0, MAX_TABLE_WIDTH),
            default=None,
            metavar="COLUMNS",
            expose_value=False,
            callback=_update,
            help="Fit tables to this width (0: never wrap). Default: the terminal's; a pipe: "
            "never wrap.",
        ),
        click.Option(
            ["--quiet", "-q"],
            is_flag=True,
            default=False,
            expose_value=False,
            callback=_update,
            help="No progress and no notes on stderr (errors and warnings still show).",
        ),
    ]


def with_global_options(command: click.Command) -> click.Command:
    """`command` with the global options appended (once; a command is loaded once per process)."""
    names = {p.name for p in command.params}
    if not names.intersection(GLOBAL_NAMES):
        command.params.extend(global_options())
    return command
