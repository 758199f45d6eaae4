"""Each measured size against the exact fit of the formula's terms, with the residual that the
measurement alone can produce there: the evidence behind every finding
(``calibration.probes.findings``).

For one stage and quantity (peak memory above the request's baseline; seconds per iteration), the
sizes are fitted exactly (``constant + Σ slope × term``) through the independent ones nearest the
target (largest first), and every other size is predicted from that fit. What the measurement can
produce there, its *tolerance*, is grounded in the measurement's own noise:

- memory: the backend's own granularity (``runtime.estimate.fit.noise.memory_slack``: 0 on the
  exact CPU backend);
- time: ``Z`` standard deviations of the residual, combining the size's own run-to-run spread, the
  spread the fit carries to it from the sizes it passes through, and a plane's local model error
  per e-fold of the fit's lever arm (``fit.noise.MODEL_ERROR``, the one value the time estimate
  uses too); and every run of the size must lie on
  the same side of the fit (a residual whose sign flips between runs is noise; a size measured once
  has no spread to judge by).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from fractions import Fraction

from attrs import frozen

from artifact.point import Point, PointKey
from artifact.spelling import point_text
from calibration.errors import CalibrationError
from calibration.probes.policy import QUANTITIES, memory_terms, work
from runtime import Pipeline
from runtime.estimate.fit.exact import estimable, fit_rows, predict, row
from runtime.estimate.fit.model import FitKey, Modeler, Policy, Refit, Sample
from runtime.estimate.fit.noise import (
    RESIDUAL,
    distance,
    median_error,
    relative_noise,
    tolerance,
)
from runtime.estimate.fit.samples import Layout, phase_layout, stage_sample
from runtime.estimate.peak_fit import held_alike
from runtime.estimate.peaks import phase_label
from runtime.kinds import PhaseKind, Quantity
from runtime.record import Phase, WarmupRecord


@frozen
class SizePoint:
    """One measured size of a stage's quantity, and the fit's value there (None where it passes)."""

    params: Point
    terms: tuple[Fraction, ...]
    value: float
    predicted: float | None
    samples: tuple[float, ...] = ()  # time: one a run
    tolerance: float = 0.0  # the residual the measurement alone can produce here

    @property
    def residual(self) -> float:
        return 0.0 if self.predicted is None else self.value - self.predicted

    @property
    def off(self) -> bool:
        """Beyond what the measurement can produce, and (time) on one side in every run."""
        if self.predicted is None or abs(self.residual) <= self.tolerance:
            return False
        if not self.samples:
            return True  # memory: counted, not sampled
        if len(self.samples) < 2:
            return False  # a time measured once has no spread to judge its residual against
        above = [s > self.predicted for s in self.samples]
        return all(above) or not any(above)


@frozen
class StageFit:
    """Every measured size of one stage's quantity, the fit through some, its value at the
    target."""

    stage: str
    quantity: Quantity
    points: tuple[SizePoint, ...]  # the largest first
    chosen: tuple[int, ...]  # the sizes the fit passes through
    at_target: (
        float  # the fit's value at the target (bytes above baseline, or seconds per iteration)
    )
    growing_at_target: float  # its part that grows with the terms (the fit minus its constant)
    growing: tuple[float, ...]  # that part at each size
    target_terms: tuple[Fraction, ...] = ()
    phase: str = ""  # the phase's label (memory): "stage:DenoisingStage", "setup:DenoisingStage"
    estimable: bool = True  # the target's term vector lies in the span of the sizes' (exact rank)
    layout: Layout | None = None  # the components active in the phase (memory): fitted apart

    def spread_at_target(self) -> float:
        """How far the fit's value at the target moves when any one size it passes through is
        replaced by the next independent one (each such fit is as consistent with the formula):
        the extrapolation's own uncertainty, 0 when every size lies on one plane."""
        rows = [row(p.terms) for p in self.points]
        values = [Fraction(p.value) for p in self.points]
        target = row(self.target_terms)
        out = 0.0
        for left_out in self.chosen:
            kept = [i for i in range(len(rows)) if i != left_out]
            coefficients, chosen = fit_rows([rows[i] for i in kept], [values[i] for i in kept])
            if chosen and estimable([rows[kept[i]] for i in chosen], target):
                out = max(out, abs(float(predict(coefficients, target)) - self.at_target))
        return out

    def growing_at(self, terms: Sequence[Fraction]) -> float:
        """The fit's growing part (its value minus its constant) at a size's terms."""
        rows = [row(p.terms) for p in self.points]
        coefficients, _ = fit_rows(rows, [Fraction(p.value) for p in self.points])
        return float(predict(coefficients, row(terms)) - coefficients[0])

    @property
    def off(self) -> tuple[int, ...]:
        return tuple(i for i, p in enumerate(self.points) if p.off)

    @property
    def beyond(self) -> tuple[int, ...]:
        """Sizes beyond the fit's with terms of their own: each tests the fit's shape."""
        rows = {self.points[i].terms for i in self.chosen}
        return tuple(
            i for i, p in enumerate(self.points) if i not in self.chosen and p.terms not in rows
        )

    @property
    def unconfirmed(self) -> bool:
        """Whether it grows towards the target with no size beyond the fit to test it."""
        return self.growing_at_target > 0 and not self.beyond


def samples_of(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    stage: str,
    policy: Policy,
    target: Point,
) -> tuple[Sample, ...]:
    """Per size (its params), the values of its runs (memory: the phase's peak above baseline, of
    the records whose phase had the policy's layout, each carried to the weights the size nearest
    ``target`` held: ``memory_values``; time: steady seconds per iteration, one sample a run:
    ``fit.samples.stage_sample``)."""
    kind, name = policy.phase or (PhaseKind.STAGE, stage)
    # The first request pays one-time costs (lazy initialisation, caches): neither its time nor its
    # peak says what the formula does (the loop re-runs its size later).
    later = records[1:] if len(records) > 2 else records
    kept = [
        r
        for r in later
        if r.ok and (policy.layout is None or phase_layout(r, stage, kind, name) == policy.layout)
    ]
    if policy.quantity == Quantity.MEMORY:
        values = memory_values(pipeline, kept, stage, (kind, name), target)
    else:
        values = [
            stage_sample(
                r, stage, int(pipeline.evaluate(**dict(r.params))[stage].iterations)
            ).seconds
            for r in kept
        ]
    by_size: dict[PointKey, list[float]] = {}
    for record, value in zip(kept, values):
        if value is not None:
            by_size.setdefault(tuple(record.params.items()), []).append(value)
    return tuple(Sample(key, tuple(runs)) for key, runs in by_size.items())


def memory_values(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    stage: str,
    phase: tuple[str, str],
    target: Point,
) -> list[float | None]:
    """Each record's phase peak above its baseline (None: the phase did not open), carried to the
    weights the size nearest ``target`` held at its peak (``peak_fit.held_alike``, as the peak
    estimate's fit reads them): under offload each size holds other weights at its peak, which
    a check would read as the formula's miss."""
    kind, name = phase
    found = [_phase(r, stage, kind, name) for r in records]
    present = [(r, p) for r, p in zip(records, found) if p is not None]
    terms = [memory_terms(pipeline, stage, dict(r.params)) for r, _ in present]
    carried = iter(
        held_alike([p for _, p in present], terms, memory_terms(pipeline, stage, target))
    )
    return [
        None if p is None else float(r.above_baseline(next(carried)))
        for r, p in zip(records, found)
    ]


def _phase(record: WarmupRecord, stage: str, kind: str, name: str) -> Phase | None:
    """The record's phase ``(kind, name)`` of ``stage`` (its windows are merged into one)."""
    return next(
        (p for p in record.phases if p.kind == kind and p.name == name and p.stage == stage), None
    )


def _sensitivities(
    rows: Sequence[tuple[Fraction, ...]], chosen: Sequence[int]
) -> list[list[float]]:
    """For each size, how the fit's value there moves with each chosen size's value."""
    out: list[list[float]] = [[0.0] * len(chosen) for _ in rows]
    for k in range(len(chosen)):
        unit = [Fraction(int(j == k)) for j in range(len(chosen))]
        coefficients, _ = fit_rows([rows[i] for i in chosen], unit)
        for i, r in enumerate(rows):
            out[i][k] = float(predict(coefficients, r))
    return out


def stage_fit(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    stage: str,
    quantity: Quantity,
    target: Point,
    slack: float,
    phase: tuple[str, str] | None = None,
    layout: Layout | None = None,
    modeler: Modeler | None = None,
) -> StageFit | None:
    """The sizes of ``stage``'s ``quantity`` (memory: of one of its phases, ``(kind, name)``, the
    stage's own by default, in one ``layout``) against the fit through them (None: under two
    sizes), fitted by ``modeler`` (a calibration's cache: each stage and policy fitted once)."""
    policy = Policy(quantity, phase, layout, slack)
    samples = samples_of(pipeline, records, stage, policy, target)
    if len(samples) < 2:
        return None
    key = FitKey(stage, policy, samples, tuple(target.items()))
    return (modeler or Refit()).fit(key, lambda k: fit_samples(pipeline, k))


def fit_samples(pipeline: Pipeline, key: FitKey) -> StageFit:
    """The exact fit of a stage's samples (``key``: two sizes at least) and each size against it."""
    stage, quantity, slack = key.stage, key.policy.quantity, key.policy.slack
    phase, target = key.policy.phase, dict(key.target)
    terms_of = QUANTITIES[quantity]
    sizes = sorted(key.samples, key=lambda s: work(pipeline, dict(s.params)), reverse=True)
    params = [dict(s.params) for s in sizes]
    runs = [list(s.runs) for s in sizes]
    values = [max(v) if quantity == Quantity.MEMORY else statistics.median(v) for v in runs]
    terms = [terms_of(pipeline, stage, p) for p in params]
    rows = [row(t) for t in terms]
    coefficients, chosen = fit_rows(rows, [Fraction(v) for v in values])
    tolerances = [slack] * len(sizes)
    if quantity == Quantity.TIME:
        tolerances = _time_tolerances(terms, values, runs, rows, chosen)
    points = tuple(
        SizePoint(
            params[i],
            terms[i],
            values[i],
            None if i in chosen else float(predict(coefficients, rows[i])),
            tuple(runs[i]) if quantity == Quantity.TIME else (),
            tolerances[i],
        )
        for i in range(len(sizes))
    )
    target_row = row(terms_of(pipeline, stage, target))
    constant = float(coefficients[0]) if coefficients else 0.0
    at_target = within_float(
        predict(coefficients, target_row), f"{stage}'s {quantity} (the fit of its sizes)", target
    )
    growing = tuple(float(predict(coefficients, r)) - constant for r in rows)
    kind, name = phase or (PhaseKind.STAGE, stage)
    return StageFit(
        stage,
        quantity,
        points,
        tuple(chosen),
        at_target,
        at_target - constant,
        growing,
        terms_of(pipeline, stage, target),
        phase_label(kind, name, stage) if quantity == Quantity.MEMORY else "",
        estimable([rows[i] for i in chosen], target_row),
        key.policy.layout,
    )


def within_float(value: Fraction | int, what: str, target: Point) -> float:
    """``value`` (``what`` at the target) as a float; past the largest one a ``CalibrationError``:
    the findings' arithmetic is in floats, and no device holds 2**1024 of anything."""
    try:
        return float(value)
    except OverflowError:
        bits = max(abs(math.floor(value)).bit_length() - 1, 0)
        raise CalibrationError(
            f"{what} at the target {point_text(target)} is about 2**{bits:,}, beyond what a "
            "float holds (2**1024): calibrate for a smaller --target, or give the formula "
            "lower powers"
        ) from None


def _time_tolerances(
    terms: Sequence[tuple[Fraction, ...]],
    values: Sequence[float],
    runs: Sequence[Sequence[float]],
    rows: Sequence[tuple[Fraction, ...]],
    chosen: Sequence[int],
) -> list[float]:
    """Z sigma of each size's residual: its own spread, the fit's there, and the model error."""
    noise = relative_noise(runs)
    own = [relative_noise([r]) if len(r) > 1 else noise for r in runs]

    def se(i: int) -> float:
        """The size's median's standard error: the pooled or its own spread, whichever is wider,
        and the clock's jitter."""
        return median_error(values[i], len(runs[i]), max(noise, own[i]))

    weights = _sensitivities(rows, chosen)
    out = []
    for i in range(len(values)):
        if i in chosen:
            out.append(0.0)
            continue
        fit_var = sum((w * se(j)) ** 2 for w, j in zip(weights[i], chosen))
        far = max((distance(terms[j], terms[i]) for j in chosen), default=0.0)
        out.append(tolerance(RESIDUAL, values[i], se(i), math.sqrt(fit_var), far))
    return out
