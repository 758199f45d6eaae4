"""The `dslc` command group: commands other packages add (the `dslc.commands` entry points,
loaded only when listed or run), the global options on each, and the guard that turns any
exception escaping a command into one line and exit 3 (a bug), or exit 1 where it is the user's
machine or input."""

from __future__ import annotations

import os
from importlib.metadata import EntryPoint, entry_points

import click

from dslc.cli_failures import Failure, internal_error
from dslc.cli_globals import with_global_options
from dslc.render_rich import NumberTooLarge

__all__ = ["PLUGIN_GROUP", "DslcGroup", "plugin_commands"]


#: Entry-point group of commands that other packages add to `dslc` (calibration adds
#: `calibrate` and `plan`); loaded only when listed or run, so the compiler never imports them.
PLUGIN_GROUP = "dslc.commands"


def plugin_commands() -> dict[str, EntryPoint]:
    """The installed plugin commands by name (not imported)."""
    return {ep.name: ep for ep in entry_points(group=PLUGIN_GROUP)}


class DslcGroup(click.Group):
    """Any exception escaping a command is a bug: one line, no traceback, exit 3.

    Commands of other packages (entry points in ``dslc.commands``) join the built-in ones lazily.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *plugin_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            plugin = plugin_commands().get(cmd_name)
            loaded = plugin.load() if plugin is not None else None
            command = loaded if isinstance(loaded, click.Command) else None
        return None if command is None else with_global_options(command)

    def invoke(self, ctx: click.Context) -> object:
        # Python's int-to-text digit guard stays on: huge values print as their leading digits and
        # digit count (render_rich.show_int), and `--json` refuses what it cannot print exactly.
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise
        except NumberTooLarge as exc:
            raise Failure(str(exc)) from None
        except ModuleNotFoundError as exc:
            if os.environ.get("DSLC_DEBUG"):
                raise
            missing = (exc.name or "").partition(".")[0]
            if missing and missing not in _OUR_PACKAGES:
                # an install without a dependency (torch, diffusers, ...): the machine's, not ours
                raise Failure(
                    f"the Python package {missing!r} is not installed, and this command needs "
                    "it: install the project with its dependencies (README.md, the setup command)"
                ) from None
            internal_error(exc)
            ctx.exit(3)
        except OSError as exc:
            if exc.filename is None:  # not about a path the user gave: ours
                if os.environ.get("DSLC_DEBUG"):
                    raise
                internal_error(exc)
                ctx.exit(3)
            # a path the user gave that the system refuses (a name too long, no permission, a
            # full disk): their input or their machine, named, exit 1
            name = str(exc.filename)
            shown = (
                name if len(name) <= 120 else f"{name[:60]}...{name[-40:]} ({len(name):,} chars)"
            )
            raise Failure(f"cannot use {shown}: {exc.strerror or exc}") from None
        except Exception as exc:
            if os.environ.get("DSLC_DEBUG"):
                raise
            internal_error(exc)
            ctx.exit(3)


_OUR_PACKAGES = frozenset({"dslc", "artifact", "runtime", "calibration", "bench", "tests"})
