"""Source files and spans: where every diagnostic points."""

from __future__ import annotations

import hashlib

import attrs


@attrs.frozen
class SourceFile:
    """A named text; kept whole so diagnostics render even for formulas built from strings."""

    name: str
    text: str = attrs.field(repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8", "surrogateescape")).hexdigest()

    def line(self, number: int) -> str:
        """The 1-based line `number` without its line ending ('' past the end)."""
        lines = self.text.split("\n")  # as Lark counts lines: \u2028 and friends are not breaks
        return lines[number - 1].rstrip("\r") if 1 <= number <= len(lines) else ""

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        offset = max(0, min(offset, len(self.text)))
        line = self.text.count("\n", 0, offset) + 1
        start = self.text.rfind("\n", 0, offset) + 1
        return line, offset - start + 1

    def span(self, start: int, end: int) -> Span:
        """The span of characters [start, end)."""
        line, column = self.position(start)
        end_line, end_column = self.position(max(end, start))
        return Span(self, line, column, end_line, end_column)


@attrs.frozen
class Span:
    """A 1-based, end-exclusive region of one source file."""

    source: SourceFile = attrs.field(eq=False, repr=False)
    line: int
    column: int
    end_line: int
    end_column: int

    def to(self, other: Span) -> Span:
        """The span covering `self` up to the end of `other`."""
        return Span(self.source, self.line, self.column, other.end_line, other.end_column)

    def __str__(self) -> str:
        return f"{self.source.name}:{self.line}:{self.column}"
