"""Tables that fit a width: aligned columns, cells wrapped at name boundaries, else stacked records.

Pure layout (no streams, no colour), so `dslc eval`, `dslc explain` and `dslc calibrate` share one
renderer and tests can pin it at any width. With no width (output piped without COLUMNS) the
table is laid out at its natural width, exactly as it always was: one line per row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

GAP = 2  # spaces between columns
MAX_ROW_LINES = 3  # a row wrapped onto more lines than this reads better stacked
MIN_VALUE_WIDTH = 12  # a stacked value is wrapped to at least this many columns

# A piece of a cell that may end a line: a run of text and the separators after it (a name
# breaks after `@`, `_`, `:`, `.`, and a formula also after `*`, `/` and `,`), or a run of spaces.
_PIECE = re.compile(r"[^ @_:.,*/]+[@_:.,*/]*|[@_:.,*/]+| +")


@attrs.frozen
class TableLine:
    """One output line and its role, so a coloured renderer can stress headers and record titles."""

    text: str
    role: str = (
        "row"  # "header" (the column titles), "title" (a stacked record's first line), "row"
    )


def wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters, broken after name boundaries when it can."""
    if len(text) <= width:
        return [text]
    lines: list[str] = []
    current = ""
    for piece in _PIECE.findall(text):
        if len((current + piece).rstrip()) <= width:
            current += piece
            continue
        if current.strip():
            lines.append(current.rstrip())
        current = piece.lstrip()
        while len(current) > width:  # a piece with no boundary inside: only then cut a word
            lines.append(current[:width])
            current = current[width:]
    if current.strip() or not lines:
        lines.append(current.rstrip())
    return lines


def pack(items: Sequence[str], width: int | None) -> list[str]:
    """`items` joined by ", " in lines of at most `width` characters, broken only between items."""
    lines: list[str] = []
    for item in items:
        if lines and (width is None or len(lines[-1]) + 2 + len(item) <= width):
            lines[-1] += ", " + item
            continue
        if lines:
            lines[-1] += ","
        lines += wrap(item, width) if width is not None else [item]
    return lines or [""]


def _longest_piece(text: str) -> int:
    return max((len(p) for p in _PIECE.findall(text) if p.strip()), default=0)


def _column_widths(natural: list[int], least: list[int], available: int) -> list[int] | None:
    """Shrink the widest columns first down to `least`; None when even that does not fit."""
    if sum(least) > available:
        return None
    low, high = 0, max(natural, default=0)
    while low < high:  # the largest cap that fits
        cap = (low + high + 1) // 2
        if sum(max(m, min(n, cap)) for n, m in zip(natural, least)) <= available:
            low = cap
        else:
            high = cap - 1
    widths = [max(m, min(n, low)) for n, m in zip(natural, least)]
    spare = available - sum(widths)
    for index, (width, full) in enumerate(zip(widths, natural)):
        extra = min(spare, full - width)
        widths[index] += extra
        spare -= extra
    return widths


def _aligned(cells: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    return (
        (" " * GAP)
        .join(cell.rjust(w) if r else cell.ljust(w) for cell, w, r in zip(cells, widths, right))
        .rstrip()
    )


def _stacked(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[TableLine]:
    """One block per row, `key: value` lines (empty values left out), blocks apart by a blank
    line.
    """
    key_width = max((len(h) for h in headers), default=0) + 2
    value_width = max(width - key_width, MIN_VALUE_WIDTH)
    lines: list[TableLine] = []
    for number, row in enumerate(rows):
        if number:
            lines.append(TableLine(""))
        first = True
        for header, cell in zip(headers, row):
            if not cell.strip():
                continue
            for index, part in enumerate(wrap(cell.strip(), value_width)):
                key = f"{header}:" if index == 0 else ""
                lines.append(TableLine(f"{key:<{key_width}}{part}", "title" if first else "row"))
                first = False
    return lines


def layout(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Sequence[bool] = (),
    width: int | None = None,
) -> list[TableLine]:
    """Aligned columns (`right[i]` right-aligns column i) within `width`, or stacked records.

    Right-aligned columns (numbers) are never wrapped. When the other columns cannot shrink
    enough without cutting a name, or a row would wrap onto more than MAX_ROW_LINES lines, each
    row becomes a block of `header: value` lines instead.
    """
    align = list(right) + [False] * (len(headers) - len(right))
    table = [list(headers), *map(list, rows)]
    natural = [max(len(row[i]) for row in table) for i in range(len(headers))]
    available = None if width is None else width - GAP * (len(headers) - 1)
    if available is None or sum(natural) <= available:
        return [
            TableLine(_aligned(row, natural, align), "header" if n == 0 else "row")
            for n, row in enumerate(table)
        ]
    least = [
        full if is_right else max(_longest_piece(row[i]) for row in table)
        for i, (full, is_right) in enumerate(zip(natural, align))
    ]
    widths = _column_widths(natural, least, available)
    if widths is None:
        return _stacked(headers, rows, width or 0)
    lines: list[TableLine] = []
    for number, row in enumerate(table):
        parts = [wrap(cell, w) for cell, w in zip(row, widths)]
        height = max(len(p) for p in parts)
        if height > MAX_ROW_LINES:
            return _stacked(headers, rows, width or 0)
        for index in range(height):
            cells = [p[index] if index < len(p) else "" for p in parts]
            role = "header" if number == 0 else "row"
            lines.append(TableLine(_aligned(cells, widths, align), role))
    return lines
