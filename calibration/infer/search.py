"""The exact, bounded searches of `dslc infer`: the smallest iteration formula and the smallest
set of monomials that reproduce the measured sizes.

Each search tries candidates simplest first, fits on the sizes chosen for fitting, and checks the
winner on the sizes held out; every candidate tried is returned with its verdict (the JSON report
lists them, the draft's comments cite the rejected ones). ``MAX_SETS`` bounds the term sets tried
per stage and quantity.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
from attrs import frozen

from artifact.spelling import point_text
from calibration.infer.terms import IterationForm, Monomial, Point, num, text_of
from dslc import ast

#: The most term sets one memory or time search tries (stage by stage).
MAX_SETS = 60_000
#: The most terms one stage's memory or time gets.
MAX_TERMS = 3
#: Bytes a memory fit may miss a size by on the exact CPU backend: nothing but rounding.
MEMORY_SLACK = 0.5


@frozen
class Tried:
    """One candidate and what became of it."""

    text: str
    verdict: str  # "chosen", "rejected: ...", "held-out miss: ..."


@frozen
class IterationFit:
    expr: ast.Expr | None
    tried: tuple[Tried, ...]

    @property
    def formula(self) -> str | None:
        return None if self.expr is None else text_of(self.expr)


@frozen
class Sample:
    """One measured size of one stage's quantity; ``held_out`` sizes only check the winner."""

    point: Point
    value: float
    held_out: bool = False
    tolerance: float = MEMORY_SLACK


def fit_iterations(
    forms: Sequence[IterationForm], counts: Sequence[tuple[Point, int, bool]]
) -> IterationFit:
    """The first constant or form that gives every fitted count and every held-out one."""
    tried: list[Tried] = []
    values = {c for _, c, _ in counts}
    if len(values) == 1:
        (only,) = values
        return IterationFit(num(only), (Tried(str(only), "chosen"),))
    tried.append(Tried("constant", "rejected: the counts differ"))
    for form in forms:
        miss = next(((p, c) for p, c, held in counts if not held and form.fn(p) != c), None)
        if miss is not None:
            tried.append(
                Tried(
                    form.text,
                    f"rejected: gives {form.fn(miss[0])} for {miss[1]} at {_show(miss[0])}",
                )
            )
            continue
        held = next(((p, c) for p, c, h in counts if h and form.fn(p) != c), None)
        if held is not None:
            tried.append(Tried(form.text, f"held-out miss at {_show(held[0])}"))
            continue
        tried.append(Tried(form.text, "chosen"))
        return IterationFit(form.expr, tuple(tried))
    return IterationFit(None, tuple(tried))


@frozen
class TermFit:
    """The smallest term set found (None: none within the limits), its coefficients and evidence."""

    terms: tuple[Monomial, ...] | None
    constant: float
    slopes: tuple[float, ...]
    residual: float  # the largest |residual| over every size, fitted and held out
    tried: int  # term sets tried
    rejected: tuple[str, ...]  # the simplest rejected sets, for the comments


def fit_terms(
    tiers: Sequence[Sequence[Monomial]],
    samples: Sequence[Sample],
    most: int = MAX_TERMS,
    limit: int = MAX_SETS,
    least: int = 0,
) -> TermFit:
    """The smallest set of monomials whose constant + non-negative combination reproduces every
    size within its tolerance (least squares on the fitted sizes, which must determine every
    slope), fitted without the held-out sizes and checked on them.

    ``tiers`` are nested candidate lists, plainest first: every set of the first tier, fewest
    terms first, then the new sets of the next (a clamp only where no plain set fits). At most
    ``limit`` sets are tried, of ``least`` terms or more.
    """
    if not samples:
        return TermFit(None, 0.0, (), 0.0, 0, ("no size measured",))
    held = np.array([s.held_out for s in samples])
    y = np.array([s.value for s in samples], dtype=float)
    tol = np.array([s.tolerance for s in samples], dtype=float)
    everything = list(dict.fromkeys(m for tier in tiers for m in tier))
    table = {m: np.array([float(m.at(s.point)) for s in samples]) for m in everything}
    ones = np.ones(len(samples))
    scale = max(1.0, float(np.abs(y).max()))
    rejected: list[str] = []
    tried = 0
    seen: set[tuple[Monomial, ...]] = set()
    for tier in tiers:
        for size in range(least, most + 1):
            for chosen in combinations(tier, size):
                if chosen in seen:
                    continue
                seen.add(chosen)
                tried += 1
                if tried > limit:
                    return TermFit(None, 0.0, (), 0.0, tried - 1, tuple(rejected))
                full = np.stack([ones, *(table[m] for m in chosen)], axis=1)
                coef, _, rank, _ = np.linalg.lstsq(full[~held], y[~held], rcond=None)
                if rank < full.shape[1]:
                    continue  # not determined by the fitted sizes: a smaller set says the same
                if any(c < -1e-9 * scale for c in coef[1:]):
                    if len(rejected) < 4:
                        rejected.append(_set_text(chosen) + " (a negative slope)")
                    continue
                residual = np.abs(full @ coef - y)
                if np.all(residual <= tol):
                    return TermFit(
                        tuple(chosen),
                        float(coef[0]),
                        tuple(float(c) for c in coef[1:]),
                        float(residual.max()),
                        tried,
                        tuple(rejected),
                    )
                if len(rejected) < 4:
                    worst = int(np.argmax(residual - tol))
                    rejected.append(
                        f"{_set_text(chosen)} (off by {residual[worst]:.3g} at "
                        f"{_show(samples[worst].point)})"
                    )
    return TermFit(None, 0.0, (), 0.0, tried, tuple(rejected))


def _set_text(chosen: Sequence[Monomial]) -> str:
    return "[" + ", ".join(m.text for m in chosen) + "]" if chosen else "constant"


def _show(point: Point) -> str:
    return point_text(point)
