"""The exact, bounded searches of `dslc infer`: the smallest iteration formula and the smallest
set of monomials that reproduce the measured sizes.

Each search tries candidates simplest first, fits on the sizes chosen for fitting, and checks the
winner on the sizes held out; of the term sets that fit with the fewest terms, the one with the
least leave-one-out error is kept (as Extra-P selects performance models), and a set with a term
only one size pins is never kept; every candidate tried is returned with its verdict (the JSON
report lists them, the draft's comments cite the rejected ones). ``MAX_SETS`` bounds the term
sets tried per stage and quantity. The term search is a policy of the one modeler
(``FitRule.SEARCH``), its samples the core's one ``Sample`` (one run a size).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import cast

from attrs import Factory, frozen

from artifact.point import Point
from artifact.spelling import point_text
from calibration.infer.terms import Feature, IterationForm, Monomial, num, text_of
from dslc import ast
from runtime.estimate.fit import (
    Rejection,
    SubsetFit,
    TermSearch,
    candidate_sets,
    leave_one_out,
    memory_slack,
)
from runtime.estimate.fit.model import FitKey, Modeler, Policy, Refit, Sample
from runtime.kinds import FitRule, Quantity

#: The most term sets one memory or time search tries (stage by stage).
MAX_SETS = 60_000
#: The most terms one stage's memory or time gets.
MAX_TERMS = 3
#: Bytes a memory fit may miss a size by on the exact CPU backend (the core's exact fits: none).
MEMORY_SLACK = memory_slack("cpu-live-tensors")
#: The fewest fitted sizes a set needs per coefficient (its terms and the constant).
SIZES_PER_TERM = 2
#: Sets of as many terms tried after the first that fits, and the most that fit weighed by
#: their leave-one-out error (each an exact fit per size).
RIVALS = 200
WEIGHED = 4


@frozen
class Tried:
    """One candidate and what became of it."""

    text: str
    verdict: str  # "chosen", "rejected: ...", "held-out miss: ..."


@frozen
class IterationFit:
    expr: ast.Expr | None
    tried: tuple[Tried, ...]
    let: Feature | None = None  # the let the expression names, declared by the draft

    @property
    def formula(self) -> str | None:
        return None if self.expr is None else text_of(self.expr)


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
        return IterationFit(form.expr, tuple(tried), form.let)
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


def _fraction(value: float) -> Fraction:
    return Fraction(value)


@frozen
class _Data:
    """The samples as the core takes them: exact values, tolerances and each term's column, and
    the core's search over them (its columns and normal equations shared by every set judged)."""

    samples: tuple[Sample, ...]
    values: tuple[Fraction, ...]
    tolerances: tuple[Fraction, ...]
    held: tuple[bool, ...]
    search: TermSearch[Monomial]
    columns: dict[Monomial, tuple[Fraction, ...]] = Factory(dict)  # each term's, once

    @staticmethod
    def of(samples: Sequence[Sample]) -> _Data:
        values = tuple(_fraction(s.value) for s in samples)
        tolerances = tuple(_fraction(s.tolerance) for s in samples)
        held = tuple(s.held_out for s in samples)

        def column(m: Monomial) -> tuple[Fraction, ...]:
            return tuple(Fraction(m.at(s.point)) for s in samples)

        search = TermSearch(column, values, tolerances, held)
        return _Data(tuple(samples), values, tolerances, held, search)

    def column(self, m: Monomial) -> tuple[Fraction, ...]:
        if m not in self.columns:
            self.columns[m] = tuple(Fraction(m.at(s.point)) for s in self.samples)
        return self.columns[m]


def loo_smape(data: _Data, chosen: Sequence[Monomial]) -> float | None:
    """The leave-one-out error of a set over the fitted sizes, as Extra-P selects performance
    models: each predicted by the core's fit through the others (``leave_one_out``), the mean
    symmetric relative error; None where a size pins a term (the others leave it undetermined)
    or the set has fewer than ``SIZES_PER_TERM`` fitted sizes a coefficient."""
    fitted = [i for i, held in enumerate(data.held) if not held]
    if len(fitted) < SIZES_PER_TERM * (len(chosen) + 1):
        return None
    columns = [data.column(m) for m in chosen]
    terms = [[c[i] for c in columns] for i in fitted]
    predicted = leave_one_out(terms, [data.values[i] for i in fitted])
    errors = []
    for i, p in zip(fitted, predicted, strict=True):
        if p is None:
            return None
        scale = (abs(p) + abs(data.values[i])) / 2
        errors.append(float(abs(p - data.values[i]) / scale) if scale else 0.0)
    return sum(errors) / len(errors) if errors else 0.0


def _rejection_text(data: _Data, r: Rejection[Monomial]) -> str:
    if r.negative or r.worst is None:
        return f"{_set_text(r.terms)} (a negative slope)"
    at = _show(data.samples[r.worst].point)
    return f"{_set_text(r.terms)} (off by {float(r.residual):.3g} at {at})"


def _judged(
    data: _Data, chosen: tuple[Monomial, ...], rejected: list[str]
) -> tuple[SubsetFit[Monomial], float] | None:
    """The core's exact fit of one set and its leave-one-out error, or None (why: ``rejected``,
    the first four kept)."""
    fit = data.search.judge(chosen, worst=len(rejected) < 4)
    if not isinstance(fit, SubsetFit):
        if fit is not None and len(rejected) < 4:
            rejected.append(_rejection_text(data, fit))
        return None
    loo = loo_smape(data, chosen)
    if loo is None:
        if len(rejected) < 4:
            rejected.append(f"{_set_text(chosen)} (a term pinned by one size)")
        return None
    return fit, loo


def fit_terms(
    tiers: Sequence[Sequence[Monomial]],
    samples: Sequence[Sample],
    most: int = MAX_TERMS,
    limit: int = MAX_SETS,
    least: int = 0,
    quantity: Quantity = Quantity.MEMORY,
    modeler: Modeler | None = None,
) -> TermFit:
    """The term set whose constant + non-negative combination gives every size within its
    tolerance: the modeler's ``FitRule.SEARCH`` policy over ``tiers`` (nested candidate lists,
    plainest first, a clamp only where no plain set fits, enumerated by the core's
    ``candidate_sets``), at most ``limit`` sets of ``least`` to ``most`` terms (``search_terms``).
    """
    if not samples:
        return TermFit(None, 0.0, (), 0.0, 0, ("no size measured",))
    candidates = tuple(tuple(tier) for tier in tiers)
    policy = Policy(
        quantity, rule=FitRule.SEARCH, candidates=candidates, least=least, most=most, limit=limit
    )
    key = FitKey("", policy, tuple(samples), ())
    return (modeler or Refit()).fit(key, search_terms)


def search_terms(key: FitKey) -> TermFit:
    """Each set the core's exact fit (``runtime.estimate.fit.subset_search``: fitted without the
    held-out sizes and checked on them), fewest terms first; of the first that fits and the sets
    of as many terms after it (``RIVALS`` tried, ``WEIGHED`` fitting), the one of least
    leave-one-out error, never one with a term one size pins (then more terms)."""
    policy = key.policy
    tiers = cast(tuple[tuple[Monomial, ...], ...], policy.candidates)
    data = _Data.of(key.samples)
    rejected: list[str] = []
    found: list[tuple[float, int, SubsetFit[Monomial]]] = []
    tried = 0
    stop: tuple[int | None, int] = (None, policy.limit)  # the size that fit first, the last tried
    for chosen in candidate_sets(tiers, policy.least, policy.most):
        if tried >= stop[1] or len(found) >= WEIGHED or stop[0] not in (None, len(chosen)):
            break
        tried += 1
        judged = _judged(data, chosen, rejected)
        if judged is not None:
            found.append((judged[1], len(found), judged[0]))
            stop = (len(chosen), min(policy.limit, tried + RIVALS))
    if not found:
        return TermFit(None, 0.0, (), 0.0, tried, tuple(rejected))
    loo, _, best = min(found, key=lambda f: (f[0], f[1]))
    return TermFit(
        best.terms,
        float(best.constant),
        tuple(float(c) for c in best.slopes),
        float(best.residual),
        tried,
        tuple(rejected[:4]),
        loo,
        len(found) - 1,
    )


def _set_text(chosen: Sequence[Monomial]) -> str:
    return "[" + ", ".join(m.text for m in chosen) + "]" if chosen else "constant"


def _show(point: Point) -> str:
    return point_text(point)
