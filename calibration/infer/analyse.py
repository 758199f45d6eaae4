"""From the ladder's records to proposals: each stage's iterations, memory and time terms.

Pure: records in, values out. The memory of a stage at a size is its phase's peak above the
request's baseline (what ``calibrate`` checks, ``calibration.probes.residuals``); its time, the
stage's seconds per iteration. A param moves a quantity when a size that departs from the base in
it alone measures otherwise; only those params enter the stage's monomials.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from attrs import frozen

from calibration.infer.layout import StagePlan
from calibration.infer.search import (
    MAX_TERMS,
    MEMORY_SLACK,
    IterationFit,
    Sample,
    TermFit,
    fit_iterations,
    fit_terms,
)
from calibration.infer.terms import Feature, Monomial, Point, features, iteration_forms, monomials
from runtime.record import WarmupRecord

#: Seconds a per-iteration time may be off whatever its size (timer, dispatch, a shared core).
TIME_JITTER = 0.002
#: The least relative tolerance of a time fit, whatever the base's spread.
TIME_FLOOR = 0.2


@frozen
class Measured:
    """One size's record and whether it only checks the fits."""

    record: WarmupRecord
    held_out: bool


@frozen
class Regime:
    param: str
    minimum: int
    dropped: tuple[Point, ...]


@frozen
class StageProposal:
    plan: StagePlan
    iterations: IterationFit
    counts: tuple[tuple[Point, int], ...]
    memory: TermFit
    memory_samples: tuple[Sample, ...]
    memory_moved_by: tuple[str, ...]
    regime: Regime | None
    time: TermFit
    time_samples: tuple[Sample, ...]


def _count(record: WarmupRecord, plan: StagePlan) -> int | None:
    if plan.stepped:
        for s in record.stage_iterations:
            if s.stage == plan.name:
                return s.measured
        return None
    counts = [p.count for p in record.phases if p.kind == "stage" and p.name == plan.name]
    return counts[0] if counts else None


def _memory(record: WarmupRecord, stage: str) -> float | None:
    peaks = [p.peak_allocated for p in record.phases if p.kind == "stage" and p.name == stage]
    return float(max(peaks) - record.baseline_allocated) if peaks else None


def _seconds(record: WarmupRecord, stage: str, iterations: int) -> float | None:
    spans = [p.duration_s for p in record.phases if p.kind == "stage" and p.name == stage]
    return sum(spans) / max(iterations, 1) if spans else None


def moved_by(samples: Sequence[Sample], base: Point, params: Sequence[str], slack: float) -> list[str]:
    """The params whose one-at-a-time sizes measure otherwise than the base."""
    at_base = [s.value for s in samples if dict(s.point) == dict(base)]
    if not at_base:
        return list(params)
    ref = at_base[0]
    out = []
    for p in params:
        alone = [
            s.value
            for s in samples
            if s.point[p] != base[p] and all(s.point[q] == base[q] for q in base if q != p)
        ]
        if any(abs(v - ref) > slack for v in alone):
            out.append(p)
    return out


def feature_table(
    contracts: Mapping[str, Sequence[str]], params: Sequence[str], steps: str | None
) -> dict[str, tuple[Feature, ...]]:
    return {p: features(p, contracts[p], steps=p == steps) for p in params}


def _regimes(samples: Sequence[Sample], params: Sequence[str]) -> list[tuple[str, int]]:
    """`probe P >= N` candidates: drop the one or two smallest values of one param."""
    out = []
    for p in params:
        values = sorted({int(s.point[p]) for s in samples})
        out.extend((p, v) for v in values[1:3])
    return out


def fit_memory(
    samples: Sequence[Sample],
    base: Point,
    params: Sequence[str],
    table: Mapping[str, Sequence[Feature]],
) -> tuple[TermFit, tuple[str, ...], Regime | None]:
    """The smallest exact memory terms, with a probe minimum when the smallest sizes are off."""
    moving = moved_by(samples, base, params, MEMORY_SLACK)
    candidates: list[Monomial] = monomials({p: table[p] for p in moving})
    fit = fit_terms(candidates, samples)
    if fit.terms is not None and not fit.terms:
        return fit, tuple(moving), None
    # Fewer terms once the smallest sizes of one param are left out: a regime, `probe P >= N`.
    fewer = MAX_TERMS if fit.terms is None else len(fit.terms) - 1
    for p, n in _regimes(samples, moving):
        kept = [s for s in samples if int(s.point[p]) >= n]
        if len(kept) < len(samples) // 2:
            continue
        trial = fit_terms(candidates, kept, fewer)
        if trial.terms is not None:
            dropped = tuple(s.point for s in samples if int(s.point[p]) < n)
            return trial, tuple(moving), Regime(p, n, dropped)
    return fit, tuple(moving), None


def fit_time(
    samples: Sequence[Sample], candidates: Sequence[Monomial]
) -> TermFit:
    return fit_terms(candidates, samples)


def propose(
    plans: Sequence[StagePlan],
    measured: Sequence[Measured],
    base: Point,
    ints: Sequence[str],
    contracts: Mapping[str, Sequence[str]],
    steps: str | None,
    base_repeats: Sequence[WarmupRecord],
) -> list[StageProposal]:
    """Every stage's proposal from the measured sizes (failed requests left out)."""
    ok = [m for m in measured if m.record.ok]
    table = feature_table(contracts, ints, steps)
    lets = [f for p in ints for f in table[p] if f.let is not None]
    forms = iteration_forms(ints, lets)
    out = []
    for plan in plans:
        counts = [
            (dict(m.record.params), c, m.held_out)
            for m in ok
            if (c := _count(m.record, plan)) is not None
        ]
        iterations = fit_iterations(forms, counts)
        mem = [
            Sample(dict(m.record.params), v, m.held_out)
            for m in ok
            if (v := _memory(m.record, plan.name)) is not None
        ]
        memory, moving, regime = fit_memory(mem, base, ints, table)
        spread = _spread(base_repeats, plan)
        times = [
            Sample(dict(m.record.params), v, m.held_out, _time_tolerance(v, spread))
            for m in ok
            if (v := _seconds(m.record, plan.name, _count(m.record, plan) or 1)) is not None
        ]
        if regime is not None:
            times = [t for t in times if int(t.point[regime.param]) >= regime.minimum]
        time = fit_time(times, monomials({p: table[p][:1] for p in moving}))
        out.append(
            StageProposal(
                plan,
                iterations,
                tuple((p, c) for p, c, _ in counts),
                memory,
                tuple(mem),
                moving,
                regime,
                time,
                tuple(times),
            )
        )
    return out


def _spread(records: Sequence[WarmupRecord], plan: StagePlan) -> float:
    """The base's relative run-to-run spread of the stage's time (0 under two runs)."""
    values = [
        v for r in records if r.ok and (v := _seconds(r, plan.name, _count(r, plan) or 1)) is not None
    ]
    if len(values) < 2:
        return 0.0
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else 0.0


def _time_tolerance(value: float, spread: float) -> float:
    return TIME_JITTER + max(3 * spread, TIME_FLOOR) * value
