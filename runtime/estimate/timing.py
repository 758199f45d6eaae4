"""Time: each stage and the whole request at the target.

A repeated stage (one whose iterations were recorded) costs its non-iteration time (kept as
measured) plus the median steady iteration (the first one dropped: it pays one-time costs) carried
to the target's ``time ~`` measure, times the target's iterations. A one-shot stage costs its time
per iteration carried to the target's measure, times the target's iterations. The request adds the
time spent outside every stage, kept as measured.

Carrying a per-iteration time to the target's measure: with one measured size, multiply by the
measure ratio (target / measured). With two or more sizes, fit ``time = constant + Σ slope_i ×
term_i`` over the terms of ``time ~`` (one term for a plain measure) by least squares over every
measured size and read it at the target, so a fixed per-call cost (launch and dispatch overhead,
which dominates small models) is not multiplied along with the work. The fit is used when the
target's terms lie in the span of the measured ones (runtime/estimate/fit/exact.py), else the ratio.
Timings are noisy where memory is exact, so every size counts, and repeated runs of one size count
by their median. Non-iteration and untracked times come from the representative record: the
successful one with the most work (sum over stages of iterations × time measure), latest on ties.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from fractions import Fraction

import attrs
from attrs import frozen

from artifact.ir import StageValues
from artifact.point import Point
from artifact.spelling import point_text
from runtime.estimate.fit.model import FitKey, Modeler, Policy, Refit, Sample
from runtime.estimate.fit.samples import StageSample, stage_sample
from runtime.estimate.fit.time_plane import SizeTimes, TimeFit, fit_time
from runtime.estimate.points import (
    Workload,
    measured_iterations,
    show_measure,
    show_terms,
    time_terms,
)
from runtime.estimate.results import Measure, StageTime, TimingEstimate
from runtime.kinds import FitRule, Method, Quantity
from runtime.record import WarmupRecord


def _work(values: Mapping[str, StageValues], record: WarmupRecord) -> Fraction:
    return sum(
        (Fraction(measured_iterations(record, s, values)) * values[s].time for s in values),
        Fraction(0),
    )


def sample_of(record: WarmupRecord, stage: str, values: Mapping[str, StageValues]) -> StageSample:
    """The record's stage through the one definition of a sample (``fit.samples.stage_sample``)."""
    return stage_sample(record, stage, int(values[stage].iterations))


def stage_sizes(work: Workload, stage: str, repeated: bool) -> list[SizeTimes]:
    """One sample per successful record of ``stage`` (its median steady iteration, or its time
    per iteration), grouped by time terms (the records of the same kind as ``repeated``),
    smallest first. A run is the unit of noise: its iterations are slow or fast together."""
    samples: dict[tuple[Fraction, ...], list[float]] = {}
    for _, record, values in work.ok:
        sample = sample_of(record, stage, values)
        if sample.seconds is not None and sample.repeated == repeated:
            terms = time_terms(work.pipeline, stage, record.params)
            samples.setdefault(terms, []).append(sample.seconds)
    return [SizeTimes(t, tuple(samples[t])) for t in sorted(samples, key=sum)]


@frozen
class _Carried:
    """A per-iteration time carried to the target's measure, how, and its spread at the target."""

    method: Method
    per_iteration: float
    how: str
    spread: float | None = None


def stage_time(
    work: Workload,
    stage: str,
    representative: tuple[int, WarmupRecord, Mapping[str, StageValues]],
    modeler: Modeler | None = None,
) -> StageTime:
    """One stage's time at the target (see the module docstring); its plane fitted by
    ``modeler`` (a calibration's cache reads a fit made before)."""
    target_n = work.target_iterations(stage)
    target_m = work.target_values[stage].time
    _, rep, rep_values = representative
    rep_sample = sample_of(rep, stage, rep_values)
    rep_n = rep_sample.count
    if rep_sample.seconds is None:
        return _not_measured(stage, rep_n, target_n, target_m)
    fixed, repeated = rep_sample.fixed_s, rep_sample.repeated

    def timed(method: Method, seconds: float | None, reason: str, measured: int) -> StageTime:
        """The stage's time with what every outcome below shares."""
        return StageTime(
            stage=stage,
            method=method,
            seconds=seconds,
            reason=reason,
            repeated=repeated,
            measured_iterations=measured,
            target_iterations=target_n,
            fixed_s=fixed,
            target_measure=target_m,
        )

    seconds = _measured_at_target(work, stage, target_n, target_m)
    if seconds is not None:
        why = "measured at the target's iterations and measure (the median of its runs)"
        return timed(Method.MEASUREMENT, seconds, why, target_n)
    sizes = stage_sizes(work, stage, repeated)
    carried: _Carried | None = None
    try:
        carried = _fitted(sizes, _plane(work, stage, sizes, modeler or Refit()), target_n)
        if carried is None:
            rep_terms = time_terms(work.pipeline, stage, rep.params)
            base = next((s.median for s in sizes if s.terms == rep_terms), rep_sample.seconds)
            carried = _scaled(base, rep_values[stage].time, target_m, len(sizes))
        seconds = None if carried is None else fixed + carried.per_iteration * target_n
    except OverflowError:  # a fit or ratio past a float (a term in height ** 120, say)
        return timed(Method.NONE, None, _PAST_A_FLOAT, rep_n)
    if carried is None or seconds is None:
        return timed(Method.NONE, None, "measured where its time measure is 0; cannot scale", rep_n)
    if not math.isfinite(seconds):
        return timed(Method.NONE, None, _PAST_A_FLOAT, rep_n)
    what = "median steady iteration" if repeated else "time per iteration"
    reason = f"{carried.how}; {what} x {target_n} target iterations" + (
        f" + {fixed:.4g} s outside iterations" if fixed else ""
    )
    return attrs.evolve(
        timed(carried.method, seconds, reason, rep_n),
        per_iteration_s=carried.per_iteration,
        spread_s=carried.spread,
    )


#: Why a stage has no time at the target when carrying its measured time there overflows.
_PAST_A_FLOAT = (
    "its time carried to the target is past what a float holds (2**1024 s): calibrate for a "
    "smaller target, or give `time ~` lower powers"
)


def _not_measured(stage: str, rep_n: int, target_n: int, target_m: Measure) -> StageTime:
    """A stage the representative record did not run: nothing to carry (none at the target)."""
    if target_n == 0:
        return StageTime(
            stage=stage,
            method=Method.MEASUREMENT,
            seconds=0.0,
            reason="does not run at the target (0 iterations)",
            repeated=False,
            measured_iterations=rep_n,
            target_iterations=0,
        )
    return StageTime(
        stage=stage,
        method=Method.NONE,
        seconds=None,
        reason="not measured in the representative record",
        repeated=False,
        measured_iterations=rep_n,
        target_iterations=target_n,
        target_measure=target_m,
    )


def _measured_at_target(
    work: Workload, stage: str, target_n: int, target_m: Measure
) -> float | None:
    """The median duration of the runs at the target's iterations and measure, if any ran there."""
    exact = [
        record.stage_durations[stage]
        for _, record, values in work.ok
        if stage in record.stage_durations
        and measured_iterations(record, stage, values) == target_n
        and values[stage].time == target_m
    ]
    return statistics.median(exact) if exact else None


#: How the time estimate fits a stage: a weighted plane over every size, read at the target.
PLANE = Policy(Quantity.TIME, rule=FitRule.PLANE)


def _plane(
    work: Workload, stage: str, sizes: Sequence[SizeTimes], modeler: Modeler
) -> TimeFit | None:
    """The plane over every measured size of the stage, read at the target's time terms."""
    samples = tuple(Sample((), s.seconds, s.terms) for s in sizes)
    key = FitKey(stage, PLANE, samples, tuple(work.target.items()))
    target_terms = time_terms(work.pipeline, stage, work.target)
    return modeler.fit(key, lambda k: fit_time(sizes, target_terms))


def _fitted(sizes: list[SizeTimes], fitted: TimeFit | None, target_n: int) -> _Carried | None:
    """The per-iteration time of the fit over every measured size, read at the target's terms;
    None where the sizes do not determine it."""
    if fitted is None:
        return None
    predicted = max(0.0, fitted.value)
    shown = ", ".join(show_terms(s.terms) for s in sizes)
    how = f"per-iteration time fitted (weighted least squares) on measures {shown}: " + (
        f"{fitted.coefficients[0]:.4g} s + "
        + " + ".join(f"{c:.4g} s x term {i + 1}" for i, c in enumerate(fitted.coefficients[1:]))
    )
    how += f", +-{fitted.spread:.2g} s at the target (noise {fitted.noise:.1%})"
    if any(c < 0 for c in fitted.coefficients[1:]):
        predicted = sizes[-1].median
        how += " (negative slope taken as flat: the largest size's time)"
    return _Carried(Method.FIT, predicted, how, fitted.spread * target_n)


def _scaled(base: float, measure: Measure, target_m: Measure, sizes: int) -> _Carried | None:
    """``base`` scaled by the ratio of the target's measure to the measured one; None where the
    measured one is 0."""
    if measure == 0:
        return None
    predicted = float(Fraction(base) * Fraction(target_m) / Fraction(measure))
    how = f"per-iteration time scaled by measure {show_measure(target_m)} / {show_measure(measure)}"
    if sizes >= 2:
        how += " (the measured sizes do not determine the time terms at the target)"
    return _Carried(Method.SCALED, predicted, how)


def request_time(work: Workload, modeler: Modeler | None = None) -> TimingEstimate:
    """Every stage of the formulas and the untracked time of the representative record."""
    if not work.ok:
        return TimingEstimate(Method.NONE, None, "no successful measurement")
    representative = max(work.ok, key=lambda item: (_work(item[2], item[1]), item[0]))
    _, rep, _ = representative
    stages = tuple(stage_time(work, s, representative, modeler) for s in work.stages)
    untracked = max(0.0, rep.duration_s - sum(rep.stage_durations.values()))
    missing = [s.stage for s in stages if s.seconds is None]
    if missing:
        return TimingEstimate(
            Method.NONE, None, f"stages not measured: {', '.join(missing)}", stages, untracked
        )
    methods = {s.method for s in stages}
    method = (
        Method.MEASUREMENT
        if methods == {Method.MEASUREMENT}
        else (Method.FIT if Method.FIT in methods else Method.SCALED)
    )
    total = sum(s.seconds or 0.0 for s in stages) + untracked
    reason = (
        f"sum of {len(stages)} stages + {untracked:.4g} s outside stages (kept), "
        f"from the record at {_describe(rep.params)}"
    )
    spreads = [0.0 if s.method == Method.MEASUREMENT else s.spread_s for s in stages]
    spread = None if None in spreads else math.sqrt(sum(x * x for x in spreads if x is not None))
    return TimingEstimate(method, total, reason, stages, untracked, spread)


def _describe(params: Point) -> str:
    return point_text(params, sep=", ")
