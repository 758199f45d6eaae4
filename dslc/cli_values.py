"""Values given on the command line: `NAME=VALUE[,...]` points (ints, `1_000`, true/false), and
the one type every float option of every command reads its number with (``FiniteRange``)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import click

from dslc.limits import MAX_LITERAL_DIGITS

__all__ = ["POINT_METAVAR", "FiniteRange", "assignments", "parse_value"]

_INT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")


def parse_value(name: str, text: str) -> int | bool:
    """`true`, `false`, or an integer (`1_000` allowed; as many digits as a literal may have)."""
    if text in ("true", "false"):
        return text == "true"
    if _INT.fullmatch(text):
        digits = text.replace("_", "").lstrip("+-")
        if len(digits) > MAX_LITERAL_DIGITS:
            raise click.BadParameter(f"{name}: more than {MAX_LITERAL_DIGITS} digits")
        return int(text.replace("_", ""))
    raise click.BadParameter(f"{name}: {text!r} is neither an integer nor true/false")


#: How every option that gives a point (`--set`, `--probe`, `--target`, `--warmup`) is written.
POINT_METAVAR = "NAME=VALUE[,...]"


def assignments(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> dict[str, int | bool]:
    """`NAME=VALUE[,NAME=VALUE...]` options, repeatable, as one dict (ints, `1_000` allowed, and
    true/false): `--set steps=4,frames=17` and `--set steps=4 --set frames=17` are the same."""
    result: dict[str, int | bool] = {}
    for raw in [part for value in values for part in value.split(",") if part.strip()]:
        name, sep, text = raw.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {raw!r}")
        if name in result:
            raise click.BadParameter(f"{name} is given twice")
        result[name] = parse_value(name, text)
    return result


class FiniteRange(click.FloatRange):
    """A float option's type: a number in range, never nan (click's comparisons let it through)
    nor inf; every float option of every command reads its value with it (a test walks them)."""

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        number = float(super().convert(value, param, ctx))  # type: ignore[arg-type]
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number
