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
target's terms lie in the span of the measured ones (runtime/estimate/planes.py), else the ratio.
Timings are noisy where memory is exact, so every size counts, and repeated runs of one size count
by their median. Non-iteration and untracked times come from the representative record: the
successful one with the most work (sum over stages of iterations × time measure), latest on ties.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from artifact.spelling import point_text
from runtime.estimate.points import (
    Workload,
    measured_iterations,
    show_measure,
    show_terms,
    time_terms,
)
from runtime.estimate.results import StageTime, TimingEstimate
from runtime.estimate.time_fit import SizeTimes, fit_time
from runtime.record import WarmupRecord


def _work(values: Mapping[str, Any], record: WarmupRecord) -> Fraction:
    return sum(
        (Fraction(measured_iterations(record, s, values)) * values[s].time for s in values),
        Fraction(0),
    )


def iteration_samples(
    record: WarmupRecord, stage: str, values: Mapping[str, Any]
) -> tuple[tuple[float, ...], float, bool] | None:
    """(per-iteration samples in seconds, fixed seconds, repeated) of one record's stage, or None
    if it did not run. A repeated stage's samples are its steady iterations (the first one dropped
    when there are more); a one-shot stage's is its time per iteration.
    """
    durations = record.stage_durations
    if stage not in durations:
        return None
    steps = [
        i.duration_s
        for i in sorted((i for i in record.iterations if i.stage == stage), key=lambda i: i.index)
    ]
    if steps:
        steady = steps[1:] if len(steps) > 1 else steps
        return tuple(steady), max(0.0, durations[stage] - sum(steps)), True
    count = measured_iterations(record, stage, values)
    if count <= 0:
        return None
    return (durations[stage] / count,), 0.0, False


def stage_sizes(work: Workload, stage: str, repeated: bool) -> list[SizeTimes]:
    """One sample per successful record of ``stage`` (its median steady iteration, or its time
    per iteration), grouped by time terms (the records of the same kind as ``repeated``),
    smallest first. A run is the unit of noise: its iterations are slow or fast together."""
    samples: dict[tuple[Fraction, ...], list[float]] = {}
    for _, record, values in work.ok:
        sample = iteration_samples(record, stage, values)
        if sample is not None and sample[2] == repeated:
            terms = time_terms(work.pipeline, stage, record.params)
            samples.setdefault(terms, []).append(statistics.median(sample[0]))
    return [SizeTimes(t, tuple(samples[t])) for t in sorted(samples, key=sum)]


def stage_time(
    work: Workload, stage: str, representative: tuple[int, WarmupRecord, Mapping[str, Any]]
) -> StageTime:
    """One stage's time at the target (see the module docstring)."""
    target_n = work.target_iterations(stage)
    target_m = work.target_values[stage].time
    _, rep, rep_values = representative
    rep_sample = iteration_samples(rep, stage, rep_values)
    rep_n = measured_iterations(rep, stage, rep_values)
    if rep_sample is None:
        if target_n == 0:
            return StageTime(
                stage,
                "measurement",
                0.0,
                "does not run at the target (0 iterations)",
                False,
                rep_n,
                0,
            )
        return StageTime(
            stage,
            "none",
            None,
            "not measured in the representative record",
            False,
            rep_n,
            target_n,
            target_measure=target_m,
        )
    samples, fixed, repeated = rep_sample
    per_iteration = statistics.median(samples)
    exact = [
        (record.stage_durations[stage], i)
        for i, record, values in work.ok
        if stage in record.stage_durations
        and measured_iterations(record, stage, values) == target_n
        and values[stage].time == target_m
    ]
    if exact:
        seconds = statistics.median(d for d, _ in exact)
        return StageTime(
            stage,
            "measurement",
            seconds,
            "measured at the target's iterations and measure (the median of its runs)",
            repeated,
            target_n,
            target_n,
            fixed,
            None,
            target_m,
        )
    sizes = stage_sizes(work, stage, repeated)
    target_terms = time_terms(work.pipeline, stage, work.target)
    fitted = fit_time(sizes, target_terms)
    spread: float | None = None
    if fitted is not None:
        predicted = max(0.0, fitted.value)
        spread = fitted.spread * target_n
        method = "fit"
        shown = ", ".join(show_terms(s.terms) for s in sizes)
        how = f"per-iteration time fitted (weighted least squares) on measures {shown}: " + (
            f"{fitted.coefficients[0]:.4g} s + "
            + " + ".join(f"{c:.4g} s x term {i + 1}" for i, c in enumerate(fitted.coefficients[1:]))
        )
        how += f", +-{fitted.spread:.2g} s at the target (noise {fitted.noise:.1%})"
        if any(c < 0 for c in fitted.coefficients[1:]):
            predicted = sizes[-1].median
            how += " (negative slope taken as flat: the largest size's time)"
    else:
        m = rep_values[stage].time
        if m == 0:
            return StageTime(
                stage,
                "none",
                None,
                "measured where its time measure is 0; cannot scale",
                repeated,
                rep_n,
                target_n,
                fixed,
                None,
                target_m,
            )
        rep_terms = time_terms(work.pipeline, stage, rep.params)
        base = next((s.median for s in sizes if s.terms == rep_terms), per_iteration)
        predicted = float(Fraction(base) * Fraction(target_m) / Fraction(m))
        method = "scaled"
        how = f"per-iteration time scaled by measure {show_measure(target_m)} / {show_measure(m)}"
        if len(sizes) >= 2:
            how += " (the measured sizes do not determine the time terms at the target)"
    what = "median steady iteration" if repeated else "time per iteration"
    reason = f"{how}; {what} x {target_n} target iterations" + (
        f" + {fixed:.4g} s outside iterations" if fixed else ""
    )
    return StageTime(
        stage,
        method,
        fixed + predicted * target_n,
        reason,
        repeated,
        rep_n,
        target_n,
        fixed,
        predicted,
        target_m,
        spread,
    )


def request_time(work: Workload) -> TimingEstimate:
    """Every stage of the formulas and the untracked time of the representative record."""
    if not work.ok:
        return TimingEstimate("none", None, "no successful measurement")
    representative = max(work.ok, key=lambda item: (_work(item[2], item[1]), item[0]))
    _, rep, _ = representative
    stages = tuple(stage_time(work, s, representative) for s in work.stages)
    untracked = max(0.0, rep.duration_s - sum(rep.stage_durations.values()))
    missing = [s.stage for s in stages if s.seconds is None]
    if missing:
        return TimingEstimate(
            "none", None, f"stages not measured: {', '.join(missing)}", stages, untracked
        )
    methods = {s.method for s in stages}
    method = (
        "measurement" if methods == {"measurement"} else ("fit" if "fit" in methods else "scaled")
    )
    total = sum(s.seconds or 0.0 for s in stages) + untracked
    reason = (
        f"sum of {len(stages)} stages + {untracked:.4g} s outside stages (kept), "
        f"from the record at {_describe(rep.params)}"
    )
    spreads = [0.0 if s.method == "measurement" else s.spread_s for s in stages]
    spread = None if None in spreads else math.sqrt(sum(x * x for x in spreads if x is not None))
    return TimingEstimate(method, total, reason, stages, untracked, spread)


def _describe(params: Mapping[str, int | bool]) -> str:
    return point_text(params, sep=", ")
