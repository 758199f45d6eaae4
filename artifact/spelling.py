"""How values are spelled in commands, messages, tables and records: the one home of every spelling.

A param value as the language writes it (`true`, `steps=4,cfg=true`); a value read from a file or
passed by a caller, bounded (repr() and str() refuse ints over 4,300 digits, and a message should
stay short anyway); an exact value from a proof, approximated past a few dozen digits; a file's
path, on one line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from fractions import Fraction

HUGE_BITS = 160  # an int or fraction of more bits is shown by its size, not its digits
PROOF_DIGITS = 30  # a value from a proof is shown with at most about this many digits


def param_value(value: object) -> str:
    """`true`/`false` for a bool, as a `.wf` file and `NAME=VALUE` options spell them; else str."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def point_text(params: Mapping[str, object], sep: str = ",", eq: str = "=") -> str:
    """`steps=4,cfg=true`: NAME `eq` VALUE per param, joined by `sep`, in the mapping's order."""
    return sep.join(f"{name}{eq}{param_value(value)}" for name, value in params.items())


def _int_size(value: int) -> str:
    """A huge int by its size, as a message names it: `<an integer of 2,001 bits>`."""
    return f"<an integer of {value.bit_length():,} bits>"


def bounded_param_value(value: object) -> str:
    """A param value a caller passed, as the language writes it; a huge int by its size."""
    if isinstance(value, int) and value.bit_length() > HUGE_BITS:  # never a bool: 1 bit at most
        return _int_size(value)
    return param_value(value)


def file_value(value: object) -> str:
    """A short, safe rendering of a file value for messages (never evaluated)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > HUGE_BITS:
        return f"of {value.bit_length():,} bits"  # repr() refuses ints over 4,300 digits
    if (
        isinstance(value, Fraction)
        and max(value.numerator.bit_length(), value.denominator.bit_length()) > HUGE_BITS
    ):
        bits = value.numerator.bit_length(), value.denominator.bit_length()
        return f"a fraction of {bits[0]:,}/{bits[1]:,} bits"
    if isinstance(value, Fraction):
        return str(value)
    text = repr(value)
    return text if len(text) <= 48 else text[:45] + "..."


def passed_value(value: object) -> str:
    """A value a caller passed, for a message, as Python writes it, bounded: a huge int by its
    size, anything else as ``file_value``."""
    if isinstance(value, int) and value.bit_length() > HUGE_BITS:
        return _int_size(value)
    return file_value(value)


def path_text(path: str | os.PathLike[str]) -> str:
    """A file's path as a message names it, always on one line: as given when every character
    prints, else as Python writes the string (``'a\\nb.json'``), so that a newline, a terminal
    escape or an undecodable byte in a name never splits or colours the message."""
    text = os.fsdecode(path)
    return text if text.isprintable() else repr(text)


def proof_value(value: object) -> str:
    """A value from a proof: `true`, `-1`, `7/2`, or `about 1.6e+3584` past PROOF_DIGITS digits."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, Fraction):
        return str(value)
    num, den = abs(value.numerator), value.denominator
    if num.bit_length() < PROOF_DIGITS * 3 and den.bit_length() < PROOF_DIGITS * 3:
        return str(value)  # under about 30 digits
    if num == 0:
        return "0"
    exponent = math.log10(num) - math.log10(den)
    whole = math.floor(exponent)
    return f"about {'-' if value < 0 else ''}{10 ** (exponent - whole):.1f}e{whole:+d}"
