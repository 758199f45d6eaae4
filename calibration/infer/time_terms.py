"""The `time ~` terms a draft writes, the same in every run, and their check against the measured
times.

The terms are chosen from the *counted work* of each size (``calibration.infer.work``: FLOPs and
bytes op by op, the same for the same shapes): the smallest set of monomials, of the grammar the
memory search uses, whose constant + non-negative combination gives every size's work per
iteration exactly (``WORK_SLACK``), else within ``WORK_APPROXIMATE`` (flagged), else the memory's
terms without steps (flagged: a guess). A clock on a shared machine moves from run to run by more
than a small term of a tiny model's time; the count does not, so two runs write the same line.

The measured times then check the chosen set: its constant + non-negative fit (the modeler's
``FitRule.NONNEGATIVE`` policy) must put every size's time within the core's one tolerance rule
under the ``ONE_SPREAD`` policy (``noise.tolerance``: the clock's jitter + ``max(Z x the base's
run-to-run spread, TIME_FLOOR)`` of the time). That verdict, noisy by nature, is the JSON
report's and the command's message, never the draft's. Where the chosen set misses
(``TimeCheck.misses``), ``calibration.infer.run`` measures those sizes once more and the least
time of a size counts: a burst of another process is not a term; a set the times fit instead is
named (``TimeCheck.alternative``), tried in a fixed order: the chosen set, then sets of up to
``MAX_TIME_TERMS`` monomials, smallest first (the core's ``candidate_sets``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from fractions import Fraction
from typing import cast

from attrs import evolve, frozen

from artifact.point import Point
from artifact.spelling import point_text
from calibration.infer.search import TermFit, fit_terms
from calibration.infer.terms import Monomial
from runtime.estimate.fit import candidate_sets, nonnegative_fit
from runtime.estimate.fit.model import FitCache, FitKey, Modeler, Policy, Refit, Sample
from runtime.kinds import FitRule, Quantity

#: The most terms a set the measured times fit instead gets (the report's alternative).
MAX_TIME_TERMS = 2
#: The tolerance in words, for docs/cli.md and the report.
TOLERANCE_TEXT = "tolerance 2 ms + max(3 x the base's spread, 20 %)"
#: Work units a byte read or written counts (``calibration.infer.work``), against 1 a
#: floating-point operation: between a CPU's ridge point (~10 FLOP/byte) and a GPU's (~200); any
#: positive weight keeps a term that moves bytes only (a scheduler step, a norm) in the exact fit.
BYTES_WEIGHT = 16
#: Relative slack of an exact work fit: nothing but float rounding (work is counted in integers).
WORK_SLACK = 1e-6
#: How far an approximate work fit may miss a size, relative, when no set is exact (a kernel
#: that rounds a small size up; a one-time cost of a stepped stage spread over its iterations).
WORK_APPROXIMATE = 0.02


@frozen
class Rejected:
    """One candidate set the measured times do not fit, and by how much (the JSON report)."""

    text: str
    detail: str


@frozen
class TimeCheck:
    """The measured times against a set: ``checked`` when every size is within its tolerance."""

    checked: bool
    sizes: int
    spread: float  # the base's relative run-to-run spread
    residual: float  # the largest |residual|, seconds
    worst: float  # the largest residual / tolerance (<= 1 when checked)
    constant: float = 0.0
    slopes: tuple[float, ...] = ()
    misses: tuple[Point, ...] = ()  # the sizes off their tolerance, worst first: to measure again
    alternative: str | None = None  # the first set the times fit when the chosen one misses
    rejected: tuple[Rejected, ...] = ()  # the sets tried for the alternative, before it


class TimeSource(StrEnum):
    """Where the draft's `time ~` terms came from (the JSON report's ``from``)."""

    WORK = "work"  # a set gives every size's counted work exactly
    APPROXIMATE = "approximate"  # within WORK_APPROXIMATE
    MEMORY = "memory"  # none does: the memory's terms without steps, a guess


@frozen
class TimeChoice:
    """What the draft's `time ~` says, why (``source``), and the measured times' check."""

    terms: tuple[Monomial, ...]
    source: TimeSource
    work: TermFit  # the work search's evidence (terms None where source is MEMORY)
    work_sizes: int
    measured: TimeCheck

    @property
    def checked(self) -> bool:
        return self.measured.checked


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


def time_fit(
    samples: Sequence[Sample], terms: Sequence[Monomial], modeler: Modeler | None = None
) -> Fit | None:
    """The modeler's non-negative fit of ``terms`` (``FitRule.NONNEGATIVE``, ``nonnegative``);
    None: no size fitted."""
    if not any(not s.held_out for s in samples):
        return None
    policy = Policy(Quantity.TIME, rule=FitRule.NONNEGATIVE, candidates=(tuple(terms),))
    return (modeler or Refit()).fit(FitKey("", policy, tuple(samples), ()), nonnegative)


def nonnegative(key: FitKey) -> Fit | None:
    """The core's non-negative fit (``runtime.estimate.fit.nonnegative_fit``) on the fitted
    sizes, weighted by each size's tolerance, the one of its subsets of the terms whose largest
    residual over tolerance, every size, is least (a term a noisy time gives a slightly negative
    slope gets 0, never a rejection): a set fits whenever one of its subsets does, so the memory's
    terms are never rejected where the constant is not. None: not determined."""
    samples = key.samples
    (terms,) = cast(tuple[tuple[Monomial, ...]], key.policy.candidates)
    rows = [[Fraction(m.at(s.point)) for m in terms] for s in samples]
    tolerances = [Fraction(s.tolerance) for s in samples]
    found = nonnegative_fit(
        rows,
        [Fraction(s.value) for s in samples],
        [1 / (t * t) for t in tolerances],
        fitted=[not s.held_out for s in samples],
        tolerances=tolerances,
    )
    if found is None:
        return None
    residuals = [abs(float(found.at(r)) - s.value) for r, s in zip(rows, samples, strict=True)]
    ratios = [r / s.tolerance for r, s in zip(residuals, samples, strict=True)]
    worst = max(range(len(samples)), key=lambda k: ratios[k])
    off = sorted((k for k in range(len(samples)) if ratios[k] > 1), key=lambda k: -ratios[k])
    return Fit(
        float(found.constant),
        tuple(float(c) for c in found.slopes),
        max(residuals),
        ratios[worst],
        point_text(samples[worst].point),
        tuple(samples[k].point for k in off),
    )


def work_terms(
    samples: Sequence[Sample], tiers: Sequence[Sequence[Monomial]], modeler: Modeler | None = None
) -> tuple[TermFit, TimeSource]:
    """The smallest set giving every size's counted work exactly, else within
    ``WORK_APPROXIMATE`` of it; MEMORY when none does."""
    exact = [evolve(s, tolerance=max(1.0, WORK_SLACK * abs(s.value))) for s in samples]
    fit = fit_terms(tiers, exact, quantity=Quantity.TIME, modeler=modeler)
    if fit.terms is not None:
        return fit, TimeSource.WORK
    loose = [evolve(s, tolerance=WORK_APPROXIMATE * abs(s.value)) for s in samples]
    approx = fit_terms(tiers, loose, quantity=Quantity.TIME, modeler=modeler)
    if approx.terms is not None:
        return approx, TimeSource.APPROXIMATE
    return fit, TimeSource.MEMORY


def check_times(
    samples: Sequence[Sample],
    terms: Sequence[Monomial],
    plain: Sequence[Monomial],
    spread: float,
    modeler: Modeler | None = None,
) -> TimeCheck:
    """The measured times (``samples`` carry their tolerance) against ``terms``; where they miss,
    the first set they fit, named: ``terms`` again, then the sets of ``plain``, smallest first."""
    fit = time_fit(samples, terms, modeler) if samples else None
    if fit is None:
        return TimeCheck(False, len(samples), spread, 0.0, 0.0)
    if fit.worst <= 1:
        return TimeCheck(
            True, len(samples), spread, fit.residual, fit.worst, fit.constant, fit.slopes
        )
    rejected: list[Rejected] = []
    alternative = None
    for chosen in candidate_sets([plain], 0, MAX_TIME_TERMS, first=tuple(terms)):
        other = time_fit(samples, chosen, modeler)
        if other is not None and other.worst <= 1:
            alternative = set_text(chosen)
            break
        detail = (
            "not determined by the fitted sizes"
            if other is None
            else f"{other.worst:.3g} x the tolerance at {other.where}"
        )
        rejected.append(Rejected(set_text(chosen), detail))
    return TimeCheck(
        False,
        len(samples),
        spread,
        fit.residual,
        fit.worst,
        fit.constant,
        fit.slopes,
        fit.misses,
        alternative,
        tuple(rejected),
    )


def choose_time(
    work: Sequence[Sample],
    times: Sequence[Sample],
    memory: Sequence[Monomial],
    work_candidates: Sequence[Sequence[Monomial]],
    plain: Sequence[Monomial],
    spread: float,
) -> TimeChoice:
    """The draft's time terms from the counted work (``memory``'s where it fits none), checked
    against the measured times; one modeler's cache fits each set once."""
    modeler = FitCache()
    if work:
        fit, source = work_terms(work, work_candidates, modeler)
    else:
        fit, source = TermFit(None, 0.0, (), 0.0, 0, ("no size counted",)), TimeSource.MEMORY
    terms = (
        tuple(fit.terms) if fit.terms is not None and source != TimeSource.MEMORY else tuple(memory)
    )
    return TimeChoice(
        terms, source, fit, len(work), check_times(times, terms, plain, spread, modeler)
    )
