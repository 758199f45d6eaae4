"""`dslc infer --axis`: the params declared on the command line, made into a skeleton's text.

One axis is one param with its range, contract, `call` argument and probe group, in the
formula language's own words::

    NAME=DEFAULT [in [LO, HI]] [where CONDITION] [-> ARG[=EXPR]] [probe]

``DEFAULT`` is an int (an int param) or true/false (a bool param). ``-> ARG`` is `call ARG = NAME`;
``-> ARG=EXPR`` is `call ARG = EXPR`, and for a bool ``-> ARG=A else B`` is `call ARG = if NAME
then A else B`. The axes marked ``probe`` form one `probe` group, in order. The text is parsed
here only as far as to place each part; the compiler checks the skeleton made of it like a file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from attrs import frozen

from dslc.limits import MAX_LITERAL_DIGITS

#: Characters an axis may not hold: they would reach beyond its own line of the skeleton.
FORBIDDEN = ("\n", "\r", "{", "}", "#", ";")
#: The longest axis text read.
MAX_AXIS = 300
#: The most axes (a skeleton's params).
MAX_AXES = 12

# ASCII only: `\d` and `\w` would take Arabic-Indic digits (`٣`), which the language refuses
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"-?[0-9](_?[0-9])*")
_HEAD = re.compile(r"(?P<name>[^=\s]*)\s*=\s*(?P<default>\S*)\s*(?P<rest>.*)")
_RANGE = re.compile(r"in\s*\[\s*(?P<lo>[^,\]]*?)\s*,\s*(?P<hi>[^\]]*?)\s*\]")


class AxisError(ValueError):
    """An axis text that cannot be placed in a skeleton; the message names the bad part."""


@frozen
class Axis:
    name: str
    default: int | bool
    low: int | None = None
    high: int | None = None
    where: str | None = None
    call: str | None = None  # the `call` line's `ARG = EXPR`
    probe: bool = False

    @property
    def param_line(self) -> str:
        if isinstance(self.default, bool):
            return f"param {self.name}: bool = {'true' if self.default else 'false'}"
        line = f"param {self.name}: int = {self.default}"
        if self.low is not None:
            line += f" in [{self.low}, {self.high}]"
        return line + (f" where {self.where}" if self.where else "")


def _int(text: str, what: str, axis: str) -> int:
    """An int as the language writes one (ASCII digits, `_` between them), up to its digits."""
    if not _INT.fullmatch(text):
        raise AxisError(f"{axis!r}: {what} {text!r} is not an integer (ASCII digits)")
    digits = text.lstrip("-").replace("_", "")
    if len(digits) > MAX_LITERAL_DIGITS:
        raise AxisError(
            f"{axis!r}: {what} has {len(digits)} digits (a literal has at most "
            f"{MAX_LITERAL_DIGITS})"
        )
    return int(text.replace("_", ""))


def _call(text: str, name: str, is_bool: bool, axis: str) -> str:
    arg, sep, expr = (t.strip() for t in text.partition("="))
    if not _NAME.fullmatch(arg):
        raise AxisError(f"{axis!r}: the call argument {arg!r} after -> is not a name")
    if not sep:
        return f"{arg} = {name}"
    if not expr:
        raise AxisError(f"{axis!r}: -> {arg}= needs a value")
    then, has_else, otherwise = (t.strip() for t in expr.partition(" else "))
    if has_else:
        if not is_bool:
            raise AxisError(f"{axis!r}: `A else B` after -> is for a bool axis (true/false)")
        if not then or not otherwise:
            raise AxisError(f"{axis!r}: -> {arg}=A else B needs both values")
        return f"{arg} = if {name} then {then} else {otherwise}"
    return f"{arg} = {expr}"


def parse_axis(text: str) -> Axis:
    """One ``--axis`` text as an Axis; an AxisError names the part that cannot be read."""
    if len(text) > MAX_AXIS:
        raise AxisError(f"an axis of {len(text)} characters (at most {MAX_AXIS})")
    bad = [c for c in FORBIDDEN if c in text]
    if bad:
        raise AxisError(f"{text!r}: an axis may not hold {bad[0]!r}")
    body = text.strip()
    probe = body.endswith(" probe") or body == "probe"
    if probe:
        body = body[: -len("probe")].rstrip()
    body, arrow, call_text = body.partition("->")
    head = _HEAD.fullmatch(body.strip())
    if head is None:
        raise AxisError(f"{text!r}: expected NAME=DEFAULT first")
    name, default_text, rest = head.group("name"), head.group("default"), head.group("rest")
    if not _NAME.fullmatch(name):
        raise AxisError(f"{text!r}: {name!r} before = is not a param name")
    is_bool = default_text in ("true", "false")
    default: int | bool = (
        default_text == "true" if is_bool else _int(default_text, "the default", text)
    )
    low = high = None
    where = None
    rest = rest.strip()
    if rest.startswith("in"):
        found = _RANGE.match(rest)
        if found is None:
            raise AxisError(f"{text!r}: expected `in [LO, HI]`, got {rest.split(' where ')[0]!r}")
        low = _int(found.group("lo"), "the range's low", text)
        high = _int(found.group("hi"), "the range's high", text)
        rest = rest[found.end() :].strip()
    if rest.startswith("where"):
        where = rest[len("where") :].strip()
        if not where:
            raise AxisError(f"{text!r}: `where` needs a condition")
        rest = ""
    if rest:
        raise AxisError(
            f"{text!r}: {rest!r} is neither `in [LO, HI]`, `where CONDITION`, `-> ARG` nor `probe`"
        )
    if is_bool and (low is not None or where is not None):
        raise AxisError(f"{text!r}: a bool axis (true/false) takes no range or `where`")
    call = _call(call_text, name, is_bool, text) if arrow else None
    if probe and is_bool:
        raise AxisError(f"{text!r}: a bool axis cannot be a probe axis")
    return Axis(name, default, low, high, where, call, probe)


def skeleton_text(name: str, axes: Sequence[Axis]) -> str:
    """The skeleton the axes declare: params, then calls, then the probe group."""
    if not _NAME.fullmatch(name):
        raise AxisError(f"{name!r} is not a pipeline name")
    if len(axes) > MAX_AXES:
        raise AxisError(f"{len(axes)} axes (at most {MAX_AXES})")
    lines = [f"pipeline {name} {{"]
    lines += [f"    {a.param_line}" for a in axes]
    calls = [f"    call {a.call}" for a in axes if a.call is not None]
    if calls:
        lines += ["", *calls]
    probed = [a.name for a in axes if a.probe]
    if probed:
        lines.append(f"    probe {', '.join(probed)}")
    return "\n".join([*lines, "}"]) + "\n"
