"""The exact, bounded searches of `dslc infer`: the smallest iteration formula and the smallest
set of monomials that reproduce the measured sizes.

Each search tries candidates simplest first, fits on the sizes chosen for fitting, and checks the
winner on the sizes held out; of the term sets that fit with the fewest terms, the one with the
least leave-one-out error is kept (as Extra-P selects performance models), and a set with a term
only one size pins is never kept; every candidate tried is returned with its verdict (the JSON
report lists them, the draft's comments cite the rejected ones). ``MAX_SETS`` bounds the term
sets tried per stage and quantity.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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
#: The fewest fitted sizes a set needs per coefficient (its terms and the constant).
SIZES_PER_TERM = 2
#: Sets of as many terms weighed by their leave-one-out error after the first that fits.
RIVALS = 200


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
    """The term set chosen (None: none within the limits), its coefficients and evidence."""

    terms: tuple[Monomial, ...] | None
    constant: float
    slopes: tuple[float, ...]
    residual: float  # the largest |residual| over every size, fitted and held out
    tried: int  # term sets tried
    rejected: tuple[str, ...]  # the simplest rejected sets, for the comments
    loo: float = 0.0  # the chosen set's leave-one-out error (SMAPE over the fitted sizes)
    rivals: int = 0  # the other sets that fit as well, of as many terms, that it was chosen from


@frozen
class _Data:
    """The samples as arrays, and each candidate monomial's column."""

    samples: tuple[Sample, ...]
    y: np.ndarray
    tol: np.ndarray
    held: np.ndarray
    table: dict[Monomial, np.ndarray]

    @staticmethod
    def of(samples: Sequence[Sample], monomials: Sequence[Monomial]) -> _Data:
        return _Data(
            tuple(samples),
            np.array([s.value for s in samples], dtype=float),
            np.array([s.tolerance for s in samples], dtype=float),
            np.array([s.held_out for s in samples]),
            {m: np.array([float(m.at(s.point)) for s in samples]) for m in monomials},
        )

    def columns(self, chosen: Sequence[Monomial]) -> np.ndarray:
        return np.stack([np.ones(len(self.y)), *(self.table[m] for m in chosen)], axis=1)


def _candidate_sets(
    tiers: Sequence[Sequence[Monomial]], least: int, most: int
) -> Iterator[tuple[tuple[int, int], tuple[Monomial, ...]]]:
    """Every set of the first tier, fewest terms first, then the new sets of the next; each
    with its (tier, size) group."""
    seen: set[tuple[Monomial, ...]] = set()
    for k, tier in enumerate(tiers):
        for size in range(least, most + 1):
            for chosen in combinations(tier, size):
                if chosen not in seen:
                    seen.add(chosen)
                    yield (k, size), chosen


def _solve(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """Least squares, None where the columns are not determined by the rows."""
    coef, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    return None if rank < x.shape[1] else coef


def loo_smape(data: _Data, chosen: Sequence[Monomial]) -> float | None:
    """The leave-one-out error of a set, as Extra-P selects models: each fitted size predicted
    by the fit on the others, the mean symmetric relative error; None where leaving one size out
    leaves a term undetermined (a term pinned by one size is no evidence)."""
    full = data.columns(chosen)
    rows = np.flatnonzero(~data.held)
    errors = []
    for i in rows:
        others = rows[rows != i]
        coef = _solve(full[others], data.y[others])
        if coef is None:
            return None
        predicted, actual = float(full[i] @ coef), float(data.y[i])
        scale = (abs(predicted) + abs(actual)) / 2
        errors.append(abs(predicted - actual) / scale if scale else 0.0)
    return float(np.mean(errors)) if errors else 0.0


def _verdict(
    data: _Data, chosen: Sequence[Monomial]
) -> tuple[str, tuple[np.ndarray, float] | None]:
    """Why ``chosen`` fails ("" where a smaller set says the same), else its fit and its
    leave-one-out error."""
    fitted = int((~data.held).sum())
    if fitted < SIZES_PER_TERM * (len(chosen) + 1):
        return f"{_set_text(chosen)} (fewer than {SIZES_PER_TERM} sizes a term)", None
    full = data.columns(chosen)
    coef = _solve(full[~data.held], data.y[~data.held])
    if coef is None:
        return "", None  # not determined by the fitted sizes: a smaller set says the same
    if any(c < -1e-9 * max(1.0, float(np.abs(data.y).max())) for c in coef[1:]):
        return f"{_set_text(chosen)} (a negative slope)", None
    residual = np.abs(full @ coef - data.y)
    if not np.all(residual <= data.tol):
        worst = int(np.argmax(residual - data.tol))
        at = _show(data.samples[worst].point)
        return f"{_set_text(chosen)} (off by {residual[worst]:.3g} at {at})", None
    loo = loo_smape(data, chosen)
    if loo is None:
        return f"{_set_text(chosen)} (a term pinned by one size)", None
    return "", (coef, loo)


def fit_terms(
    tiers: Sequence[Sequence[Monomial]],
    samples: Sequence[Sample],
    most: int = MAX_TERMS,
    limit: int = MAX_SETS,
    least: int = 0,
) -> TermFit:
    """The set of monomials whose constant + non-negative combination reproduces every size
    within its tolerance (least squares on the fitted sizes, which must determine every slope
    with any one of them left out, ``SIZES_PER_TERM`` sizes a term at least), fitted without
    the held-out sizes and checked on them; of the fewest terms that fit, the one whose
    leave-one-out error is least (up to ``RIVALS`` more sets of as many terms weighed).

    ``tiers`` are nested candidate lists, plainest first (a clamp only where no plain set fits).
    At most ``limit`` sets are tried, of ``least`` terms or more.
    """
    if not samples:
        return TermFit(None, 0.0, (), 0.0, 0, ("no size measured",))
    data = _Data.of(samples, list(dict.fromkeys(m for tier in tiers for m in tier)))
    rejected: list[str] = []
    found: list[tuple[float, int, tuple[Monomial, ...], np.ndarray]] = []
    group, group_end, tried = None, limit, 0
    for key, chosen in _candidate_sets(tiers, least, most):
        if tried >= min(limit, group_end) or (group is not None and key != group):
            break
        tried += 1
        why, fitted = _verdict(data, chosen)
        if fitted is None:
            if why and len(rejected) < 4:
                rejected.append(why)
            continue
        found.append((fitted[1], len(found), chosen, fitted[0]))
        if group is None:
            group, group_end = key, tried + RIVALS
    if not found:
        return TermFit(None, 0.0, (), 0.0, tried, tuple(rejected))
    loo, _, chosen, coef = min(found, key=lambda f: (f[0], f[1]))
    residual = np.abs(data.columns(chosen) @ coef - data.y)
    slopes = tuple(float(c) for c in coef[1:])
    return TermFit(
        chosen,
        float(coef[0]),
        slopes,
        float(residual.max()),
        tried,
        tuple(rejected),
        loo,
        len(found) - 1,
    )


def _set_text(chosen: Sequence[Monomial]) -> str:
    return "[" + ", ".join(m.text for m in chosen) + "]" if chosen else "constant"


def _show(point: Point) -> str:
    return point_text(point)
