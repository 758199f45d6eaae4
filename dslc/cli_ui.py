"""The output of one `dslc` invocation: its two streams (plain or coloured, fitted to a width),
whether notes show (`--quiet`), and how a command's examples are laid out in its help."""

from __future__ import annotations

import sys

import click

from dslc.render_rich import Output, use_color

__all__ = ["Ui", "examples", "ui"]


class Ui:
    """The two output streams of one invocation, and whether notes (progress, `wrote`) show."""

    def __init__(self, color: str = "auto", width: int | None = None, quiet: bool = False):
        self.mode = color
        self.width = width
        self.quiet = quiet
        self.out = Output(sys.stdout, use_color(sys.stdout, color), width)
        self.err = Output(sys.stderr, use_color(sys.stderr, color), width)

    def note(self, text: str, style: str | None = None) -> None:
        """A line about the run, not its result (`wrote FILE`, a step, a `note[...]`), on stderr;
        not --quiet."""
        if not self.quiet:
            self.err.line(text, style)


def ui() -> Ui:
    ctx = click.get_current_context(silent=True)
    found = ctx.find_object(Ui) if ctx is not None else None
    return found if found is not None else Ui()


def examples(*lines: str) -> str:
    """A command's epilog: example lines that click must not rewrap."""
    title = "Examples:" if len(lines) > 1 else "Example:"
    return "\b\n" + title + "\n" + "\n".join(f"  {line}" for line in lines)
