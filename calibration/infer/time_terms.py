"""The `time ~` terms a draft writes: checked against the measured times within their spread, and
chosen the same way in every run.

Candidates are tried in one fixed order of preference: the memory's terms without the steps
param (what grows the working set grows the work), then every set of up to ``MAX_TIME_TERMS``
monomials over the other int params, fewest terms first, plainest first. The first whose
constant + non-negative combination puts every size's time within its tolerance is chosen:
``TIME_JITTER`` seconds + ``max(SPREAD_FACTOR x the base's run-to-run spread, TIME_FLOOR)`` of
the time. A candidate either misses by far more than the noise (a term it lacks grows the time
several-fold over the ladder) or fits with room to spare, so noise within the spread does not
change the choice. When none fits, the memory's terms are written marked UNCHECKED. Where the
memory's set misses (``TimeChoice.misses``), ``calibration.infer.run`` measures those sizes once
more and the least time of a size counts: a burst of another process is not a term.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
from attrs import frozen

from artifact.spelling import point_text
from calibration.infer.search import Sample
from calibration.infer.terms import Monomial, Point

#: Seconds a per-iteration time may be off whatever its size (timer, dispatch, a shared core).
TIME_JITTER = 0.002
#: The least relative tolerance of a time fit, whatever the base's spread.
TIME_FLOOR = 0.2
#: How many times the base's relative spread a size's time may be off.
SPREAD_FACTOR = 3
#: The most terms a searched time set gets (the memory's own set may have more).
MAX_TIME_TERMS = 2
#: The tolerance in words, for the draft's comments and docs/cli.md.
TOLERANCE_TEXT = "tolerance 2 ms + max(3 x the base's spread, 20 %)"


@frozen
class Rejected:
    """One candidate set before the chosen one, and by how much it missed (the JSON report)."""

    text: str
    detail: str


@frozen
class TimeChoice:
    """What the draft's `time ~` says and the evidence; ``checked``: within the spread."""

    terms: tuple[Monomial, ...]
    checked: bool
    from_memory: bool  # the memory's terms without steps (else a set of the search)
    sizes: int
    spread: float  # the base's relative run-to-run spread
    residual: float  # the chosen set's largest |residual|, seconds (UNCHECKED: the memory set's)
    worst: float  # the chosen set's largest residual / tolerance (<= 1 when checked)
    rejected: tuple[Rejected, ...]  # every candidate before the chosen one, in order
    constant: float = 0.0
    slopes: tuple[float, ...] = ()
    misses: tuple[Point, ...] = ()  # where the memory's set is off, worst first: to measure again


def tolerance(value: float, spread: float) -> float:
    """How far a size's time per iteration may be off the fit."""
    return TIME_JITTER + max(SPREAD_FACTOR * spread, TIME_FLOOR) * value


def candidates(memory: Sequence[Monomial], plain: Sequence[Monomial]) -> list[tuple[Monomial, ...]]:
    """The fixed order of preference: the memory's set, then the search's sets, smallest first."""
    out: list[tuple[Monomial, ...]] = [tuple(memory)]
    for size in range(MAX_TIME_TERMS + 1):
        out.extend(combinations(plain, size))
    return list(dict.fromkeys(out))


def set_text(terms: Sequence[Monomial]) -> str:
    if not terms:
        return "constant"
    return terms[0].text if len(terms) == 1 else "[" + ", ".join(m.text for m in terms) + "]"


@frozen
class Fit:
    constant: float
    slopes: tuple[float, ...]
    residual: float  # the largest |residual|, every size
    worst: float  # the largest |residual| / tolerance
    where: str  # the size of the worst
    misses: tuple[Point, ...] = ()  # the sizes off their tolerance, worst first


def nonnegative_fit(samples: Sequence[Sample], terms: Sequence[Monomial]) -> Fit | None:
    """A constant + non-negative slopes, fitted on the fitted sizes by least squares weighted by
    each size's tolerance: of the fits on every subset of the terms whose slopes are all >= 0
    (a term a noisy time gives a slightly negative slope gets 0, never a rejection), the one
    whose largest residual over tolerance, every size, is least. A set therefore fits whenever
    one of its subsets does: the memory's terms are never rejected where the constant is not."""
    fitted = [s for s in samples if not s.held_out]
    if not fitted:
        return None
    weight = np.array([1.0 / s.tolerance for s in fitted])
    y = np.array([s.value for s in fitted])
    tol = np.array([s.tolerance for s in samples])
    every = np.array([s.value for s in samples])
    columns = np.array([[float(m.at(s.point)) for m in terms] for s in samples]).reshape(
        len(samples), len(terms)
    )
    rows = np.array([not s.held_out for s in samples])
    best: tuple[float, np.ndarray] | None = None
    for size in range(len(terms) + 1):
        for kept in combinations(range(len(terms)), size):
            x = np.hstack([np.ones((len(fitted), 1)), columns[rows][:, list(kept)]])
            coef, _, rank, _ = np.linalg.lstsq(x * weight[:, None], y * weight, rcond=None)
            if rank < x.shape[1] or any(c < 0 for c in coef[1:]):
                continue
            full = np.zeros(len(terms) + 1)
            full[0] = coef[0]
            full[[k + 1 for k in kept]] = coef[1:]
            ratio = float(np.max(np.abs(full[0] + columns @ full[1:] - every) / tol))
            if best is None or ratio < best[0] - 1e-12:
                best = (ratio, full)
    if best is None:
        return None
    _, full = best
    residuals = np.abs(full[0] + columns @ full[1:] - every)
    ratios = residuals / tol
    worst = int(np.argmax(ratios))
    off = sorted((k for k in range(len(samples)) if ratios[k] > 1), key=lambda k: -ratios[k])
    return Fit(
        float(full[0]),
        tuple(float(c) for c in full[1:]),
        float(residuals.max()),
        float(ratios[worst]),
        point_text(samples[worst].point),
        tuple(samples[k].point for k in off),
    )


def choose_time(
    samples: Sequence[Sample],
    memory: Sequence[Monomial],
    plain: Sequence[Monomial],
    spread: float,
) -> TimeChoice:
    """The first candidate within every size's tolerance (``samples`` carry it), else the
    memory's set, UNCHECKED."""
    rejected: list[Rejected] = []
    misses: tuple[Point, ...] = ()
    for chosen in candidates(memory, plain):
        fit = nonnegative_fit(samples, chosen) if samples else None
        if fit is not None and not rejected:
            misses = fit.misses
        if fit is not None and fit.worst <= 1:
            return TimeChoice(
                chosen,
                True,
                chosen == tuple(memory),
                len(samples),
                spread,
                fit.residual,
                fit.worst,
                tuple(rejected),
                fit.constant,
                fit.slopes,
                misses,
            )
        detail = (
            "not determined by the fitted sizes"
            if fit is None
            else f"{fit.worst:.3g} x the tolerance at {fit.where}"
        )
        rejected.append(Rejected(set_text(chosen), detail))
    return TimeChoice(
        tuple(memory), False, True, len(samples), spread, 0.0, 0.0, tuple(rejected), misses=misses
    )
