"""Bytes and seconds as every table, error and warning spells them, and sizes read from options.

One home for units so that a table, an error and a warning name the same quantity the same way:
binary units with three significant figures (`26.8 KiB`), times in the unit that keeps them
readable (`350 µs`, `12.4 ms`, `1.52 s`), and the sign the JSON field has (a positive
`missing_bytes` is shown positive).
"""

from __future__ import annotations

import math
import re

_BINARY = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
#: From 2**60 bytes (1 EiB, a million TiB) a size is shown by its power of two: a fit beyond any
#: device printed in TiB would be a number of hundreds of digits.
_HUGE_BITS = 60
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*")
MAX_SIZE_DIGITS = 30  # a size option longer than this is refused, not parsed


def show_bytes(value: float | None) -> str:
    """`-` for unknown, else binary units with three significant figures: `28.6 GiB`, `-512 B`;
    from 1 EiB, by its power of two (`~2**996 B`)."""
    if isinstance(value, int) and value.bit_length() > _HUGE_BITS:  # past a float too
        return f"{'-' if value < 0 else ''}~2**{abs(value).bit_length() - 1} B"
    if value is None or not math.isfinite(value):
        return "-"
    sign, size = ("-", -value) if value < 0 else ("", value)
    if size >= 1 << _HUGE_BITS:
        return f"{sign}~2**{math.floor(math.log2(size))} B"
    for unit, scale in _BINARY:
        if size >= scale:
            return f"{sign}{_three(size / scale)} {unit}"
    return f"{sign}{round(size)} B"


def show_seconds(value: float | None) -> str:
    """`-` for unknown, else a time in s, ms or µs with three significant figures: `12.4 ms`."""
    if value is None or not math.isfinite(value):
        return "-"
    sign, size = ("-", -value) if value < 0 else ("", value)
    if size == 0:
        return "0 ms"
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if size >= scale:
            return f"{sign}{_three(size / scale)} {unit}"
    return f"{sign}{_three(size / 1e-6)} µs"


def _three(value: float) -> str:
    """Three significant figures, trailing zeros dropped, never in exponent notation (1020, not
    1.02e+03)."""
    return f"{value:.0f}" if value >= 999.5 else f"{value:.3g}"


def parse_size(text: str, *, per_second: bool = False, unit_required: bool = False) -> int:
    """``80GiB``, ``1.5TB``, ``123456`` (bytes); with ``per_second``, ``25GB/s`` too.

    With ``unit_required`` a bare number other than 0 is refused (``24`` is more likely 24 GiB
    than 24 bytes): ``ValueError`` naming the spellings.
    """
    body = text.strip()
    if per_second and body.lower().endswith("/s"):
        body = body[:-2]
    match = _SIZE.fullmatch(body)
    unit = match.group(2).lower() if match else ""
    example = "25GB/s" if per_second else "24GiB"
    if match is None or len(match.group(1)) > MAX_SIZE_DIGITS or (unit and unit not in _SIZE_UNITS):
        raise ValueError(
            f"{text!r} is not a size; write e.g. {example}, 80GiB, 24GB, 512MiB or 1024B"
        )
    if not unit and unit_required and match.group(1).strip("0.") != "":
        raise ValueError(
            f"{text!r} has no unit; write e.g. {match.group(1)}GiB, {match.group(1)}GB or "
            f"{match.group(1)}B (bytes)"
        )
    whole, _, frac = match.group(1).partition(".")
    scale = _SIZE_UNITS[unit or "b"]
    return int(whole) * scale + ((int(frac) * scale) // 10 ** len(frac) if frac else 0)
