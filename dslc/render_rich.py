"""Terminal output for the CLI: plain text by default, colour (rich) only on a terminal.

Nothing here decides *what* to say, only how it looks. Colour is used when the stream is a
terminal and `NO_COLOR` is unset (or when `--color always` asks for it). User text is never
interpreted as rich markup: the console is created with `markup=False` and `emoji=False`, and
every piece of text is handed over as a `rich.text.Text`, so `[bold]` in a file name or a
message prints as written.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import IO, TYPE_CHECKING

import click

from dslc.diagnostics import Diagnostic, render

if TYPE_CHECKING:  # rich is imported only when colouring
    from rich.console import Console
    from rich.text import Text

COLOR_MODES = ("auto", "always", "never")
MAX_TABLE_WIDTH = 10_000  # a larger COLUMNS is ignored (natural width)

_GUTTER = re.compile(r"^( *\d* \| )")
_CARETS = re.compile(r"^ *\| *(\^+)$")
_NOTE = re.compile(r"^(?:(.*?): )?(note:)")
_SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow"}
# Control characters (but tab and newline), bidi overrides and lone surrogates (undecodable file
# names) must not reach the terminal: each becomes one U+FFFD, so caret columns stay aligned.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(text: str) -> str:
    return _UNPRINTABLE.sub("\ufffd", text)


def use_color(stream: IO[str], mode: str = "auto") -> bool:
    """Whether to colour `stream`: `always`, `never`, or (auto) a terminal without NO_COLOR."""
    if mode != "auto":
        return mode == "always"
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):
        return False


SHOW_DIGITS = 40  # a longer integer prints as its leading digits and its digit count
JSON_MAX_DIGITS = 4300  # `--json` prints integers exactly up to Python's own int-to-text limit


class NumberTooLarge(ValueError):
    """A value `--json` cannot print exactly (an int past JSON_MAX_DIGITS, a float overflow)."""


def digit_count(value: int) -> int:
    """Decimal digits of `abs(value)`, without converting it to text (works past the guard)."""
    value = abs(value)
    if value < 10**18:
        return len(str(value))
    count = value.bit_length() * 30103 // 100000  # log10(2) from below: at most one short
    return count + 1 if value >= 10**count else count


def show_int(value: int) -> str:
    """An integer for people: exact up to SHOW_DIGITS digits, else `1234567...(2,001 digits)`."""
    count = digit_count(value)
    if count <= SHOW_DIGITS:
        return str(value)
    lead = abs(value) // 10 ** (count - 7)
    return f"{'-' if value < 0 else ''}{lead}...({count:,} digits)"


def show_number(value: int | Fraction) -> str:
    """A measure or ratio for people: exact when integral (huge ones bounded), else a decimal."""
    if isinstance(value, int) or value.denominator == 1:
        return show_int(int(value))
    if abs(value) >= 10**SHOW_DIGITS:  # past what a float can say readably (or at all)
        return "~" + show_int(round(value))
    text = format(float(value), ".6g")
    if "e" in text and abs(value) >= 1:
        text = f"{float(value):.2f}"
    return text


def json_number(value: int | Fraction) -> int | float:
    """A measure for JSON: an integer when integral (exactly, up to JSON_MAX_DIGITS digits), else
    a float; NumberTooLarge beyond either."""
    if isinstance(value, int) or value.denominator == 1:
        count = digit_count(int(value))
        if count > JSON_MAX_DIGITS:
            raise NumberTooLarge(
                f"a value has {count:,} digits; --json prints integers of at most "
                f"{JSON_MAX_DIGITS:,} digits exactly (without --json: its leading digits)"
            )
        return int(value)
    try:
        return float(value)
    except OverflowError:
        raise NumberTooLarge(
            f"a value of about {show_int(round(value))} is beyond the range of a JSON number "
            "(without --json: its leading digits)"
        ) from None


class Output:
    """One output stream (stdout or stderr), plain or coloured."""

    def __init__(self, stream: IO[str], color: bool, width: int | None = None):
        self.stream = stream
        self.color = color
        self.width = table_width(stream, width)
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console  # only when colouring: keeps plain runs light

            self._console = Console(
                file=self.stream,
                force_terminal=True,
                markup=False,
                emoji=False,
                highlight=False,
                soft_wrap=True,
            )
        return self._console

    def _text(self, text: str, style: str | None = None) -> Text:
        from rich.text import Text

        return Text(printable(text), style=style or "")

    def line(self, text: str = "", style: str | None = None) -> None:
        """One line of user-facing text; `style` (a rich style) applies only in colour."""
        if self.color:
            self.console.print(self._text(text, style))
        else:
            click.echo(printable(text), file=self.stream)

    def labelled(self, label: str, items: Sequence[str]) -> None:
        """`label` then `items` joined by ", ", wrapped between items to `table_width`."""
        from dslc.tables import pack

        width = self.width
        lines = pack(items, None if width is None else max(width - len(label), 20))
        for index, part in enumerate(lines):
            self.line((label if index == 0 else " " * len(label)) + part)

    def json(self, document: object) -> None:
        click.echo(json.dumps(document, indent=2), file=self.stream)

    def diagnostic(self, diagnostic: Diagnostic) -> None:
        """`render()`'s text, unchanged, then a blank line, so that no caret line runs into the
        next diagnostic or the summary; in colour the severity, carets and help stand out."""
        text = printable(render(diagnostic))
        if not self.color:
            click.echo(text + "\n", file=self.stream)
            return
        for number, line in enumerate(text.split("\n")):
            self.console.print(self._styled_line(diagnostic, number, line))
        self.console.print()

    def _styled_line(self, diagnostic: Diagnostic, number: int, line: str) -> Text:
        text = self._text(line)
        severity = _SEVERITY_STYLE[diagnostic.severity]
        if number == 0:
            where = f"{diagnostic.span}: " if diagnostic.span is not None else ""
            label = f"{diagnostic.severity}[{diagnostic.code}]:"
            text.stylize("bold", 0, len(where))
            text.stylize(severity, len(where), len(where) + len(label))
            text.stylize("bold", len(where) + len(label))
        elif line.startswith("help: "):
            text.stylize("bold cyan", 0, len("help:"))
        elif (carets := _CARETS.match(line)) is not None:
            text.stylize("blue", 0, line.index("|") + 1)
            text.stylize(severity, carets.start(1), carets.end(1))
        elif (gutter := _GUTTER.match(line)) is not None:
            text.stylize("blue", 0, gutter.end(1))
        elif (note := _NOTE.match(line)) is not None:
            text.stylize("bold", 0, note.start(2))
            text.stylize("bold cyan", note.start(2), note.end(2))
        return text

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] = ()
    ) -> None:
        """Aligned columns (`right[i]` right-aligns column i) fitted to `table_width`
        (dslc.tables).
        """
        from dslc.tables import layout

        for line in layout(headers, rows, right, self.width):
            self.line(line.text, style="bold" if line.role in ("header", "title") else None)


def table_width(stream: IO[str], requested: int | None = None) -> int | None:
    """The width tables fit: `--width` (0: natural), else a terminal's (COLUMNS first), else None.

    None, the natural width, is what a pipe or a file gets whatever COLUMNS says (tools such as
    pytest-xdist export COLUMNS), so piped output never depends on the environment.
    """
    if requested is not None:
        return requested or None
    isatty = getattr(stream, "isatty", None)
    try:
        if not (isatty and isatty()):
            return None
    except (OSError, ValueError):
        return None
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and 0 < int(columns) <= MAX_TABLE_WIDTH:
        return int(columns)
    try:
        return os.get_terminal_size(stream.fileno()).columns or None
    except (OSError, ValueError, AttributeError):
        return None


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
