"""Each fitted term's part of a stage at the default workload: what tells a term that carries the
stage from one that barely moves it; the draft's comments and the JSON report give the same."""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen

from artifact.point import Point
from calibration.infer.search import TermFit
from calibration.infer.terms import Monomial

#: The constant's name in a list of shares.
CONSTANT = "constant"


@frozen
class Share:
    """One term (or the constant): its fitted coefficient, its value at the point (coefficient x
    the term there) and its fraction of the stage's total there (None where the total is 0)."""

    text: str
    coefficient: float
    value: float
    fraction: float | None


def shares(fit: TermFit, point: Point) -> tuple[Share, ...]:
    """The terms of ``fit`` in order, then the constant, each with its part of the total at
    ``point`` (none for a fit without terms)."""
    if not fit.terms:
        return ()
    values = [_at(m, point) * c for m, c in zip(fit.terms, fit.slopes, strict=True)]
    total = sum(values) + fit.constant
    parts = [
        *((m.text, c, v) for m, c, v in zip(fit.terms, fit.slopes, values, strict=True)),
        (CONSTANT, fit.constant, fit.constant),
    ]
    return tuple(Share(t, c, v, v / total if total > 0 else None) for t, c, v in parts)


def _at(term: Monomial, point: Point) -> float:
    return float(term.at(point))


def share_text(parts: Sequence[Share], unit: str) -> str:
    """`322.8 B x height * width (98.1%); constant 1.2e+06 B (1.9%)`: each part as the formula
    reads, its coefficient (the JSON's, to 6 significant digits) times its term, and its
    fraction (a conditional term in parentheses: `2048 B x (if cfg then 2 else 1)`)."""
    out = []
    for s in parts:
        of = "" if s.fraction is None else f" ({_percent(s.fraction)})"
        value = f"{s.coefficient:.6g} {unit}"
        term = f"({s.text})" if s.text.startswith("if ") else s.text
        out.append(f"{s.text} {value}{of}" if s.text == CONSTANT else f"{value} x {term}{of}")
    return "; ".join(out)


def _percent(fraction: float) -> str:
    """`98.1%`; a part that rounds to nothing reads `0.0%`, never `-0.0%`."""
    text = f"{fraction:.1%}"
    return "0.0%" if text == "-0.0%" else text
