"""Scoring one mistake's calibration, pure: which stages miss at the target, which findings are
actionable, whether every missing stage is named (or the refusal names the bad fact), and whether
the run's time evidence could judge a mistake about time at all."""

from __future__ import annotations

from typing import TYPE_CHECKING

from calibration.examples.mistakes.model import Miss, Mistake, Named, Outcome
from calibration.probes.findings import check
from calibration.probes.time_evidence import median_spread, unclean
from runtime.kinds import Quantity

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration
    from calibration.probes.residuals import SizePoint
    from runtime import Pipeline

#: A stage misses when its raw prediction is off the measured peak (or time) by more than this.
MISS = 0.05


def _memory_misses(calibration: Calibration) -> list[Miss]:
    out = []
    measured_stages = set()
    for phase, shown in zip(calibration.estimate.phases, calibration.phases(), strict=True):
        if phase.stage is None or shown.measured is None:
            continue
        measured_stages.add(phase.stage)
        why = []
        error = shown.error
        if error is not None and abs(error) > MISS:
            why.append(f"raw {error * 100:+.1f} %")
        if shown.bound is not None and shown.bound < shown.measured:
            why.append("bound under the measured peak")
        if why:
            out.append(
                Miss(
                    phase.stage,
                    "memory",
                    shown.label,
                    shown.predicted,
                    shown.bound,
                    shown.measured,
                    ", ".join(why),
                )
            )
    return out


def _time_misses(calibration: Calibration) -> list[Miss]:
    """Stages whose time misses by more than ``MISS`` and more than the estimate's two sigma."""
    out = []
    estimated = calibration.estimate.timing.stages
    for shown, stage in zip(calibration.stage_times(), estimated, strict=True):
        if shown.predicted is None or shown.measured is None or shown.error is None:
            continue
        two_sigma = 2e3 * (stage.spread_s or 0.0)
        if abs(shown.error) > MISS and abs(shown.predicted - shown.measured) > two_sigma:
            out.append(
                Miss(
                    stage.stage,
                    "time",
                    f"time:{stage.stage}",
                    shown.predicted,
                    None,
                    shown.measured,
                    f"raw {shown.error * 100:+.1f} % (two sigma {two_sigma:.3g} ms)",
                )
            )
    return out


def time_unjudged(mistake: Mistake, result: Calibration, pipeline: Pipeline) -> str | None:
    """Why this calibration cannot judge a mistake about time (None: it can, or the mistake is
    not about time): no size is off its fit on clean, replicated evidence, yet some size shows a
    residual beyond the spread of its own runs -- the miss is there, and only the noise the fit
    carries to that size (a loaded machine's bursts in the sizes it rests on) hides it (issue 41
    item 4: then the checks say nothing, or a time-unknown note, never an alarm). Where every
    residual lies within its own runs' spread the sizes showed no miss: the mistake is judged
    (and missed), never excused as noise. Shows each size's residual and noise."""
    if Quantity.TIME not in mistake.quantities:
        return None
    target = dict(mistake.target)
    checked = check(pipeline, result.records, target, result.backend, (Quantity.TIME,))
    fits = [f for f in checked.fits if f.stage in mistake.stages]
    if any(f.off and unclean(f) is None for f in fits):
        return None
    if not any(_beyond_own_runs(p) for f in fits for p in f.points if p.predicted is not None):
        return None
    return "; ".join(
        f"{f.stage} time residuals "
        + ", ".join(
            f"{p.residual * 1e3:+.1f} ms (noise {p.tolerance * 1e3:.1f})"
            for p in f.points
            if p.predicted is not None
        )
        + (f" ({unclean(f)})" if f.off else "")
        for f in fits
    )


def _beyond_own_runs(point: SizePoint) -> bool:
    """Whether a size's residual exceeds the spread of its own runs (a miss its runs agree on:
    ``time_evidence.median_spread``, the one reading of a median's runs)."""
    return len(point.samples) > 1 and abs(point.residual) > median_spread(point)


def evaluate(mistake: Mistake, result: Calibration | str, pipeline: Pipeline) -> Outcome:
    """The outcome of one calibration (or refusal) of ``mistake``'s compiled ``pipeline``."""
    stages = tuple(pipeline.stages)
    facts = (mistake.refusal,) if mistake.refusal else mistake.stages
    if isinstance(result, str):
        return Outcome(
            mistake.name, mistake.family, (), (), result, (), facts, (), mistake.direction
        )
    misses: list[Miss] = []
    noise: tuple[Miss, ...] = ()
    run = result.measured
    if run is None or not run.ok or result.errors:
        misses = [Miss(s, "request", s, None, None, None, "request failed") for s in stages]
    else:
        if Quantity.MEMORY in mistake.quantities:
            misses += _memory_misses(result)
        if Quantity.TIME in mistake.quantities:
            timed = _time_misses(result)
            misses += [m for m in timed if m.stage in mistake.stages]
            noise = tuple(m for m in timed if m.stage not in mistake.stages)
        measured = {p.stage for p in run.phases if p.stage is not None}
        misses += [
            Miss(s, "memory", s, None, None, None, "not measured at the target")
            for s in stages
            if s not in measured
        ]
    findings = tuple(
        Named(f.kind, f.stage, f.quantity, f.direction, f.actionable) for f in result.findings
    )
    return Outcome(
        mistake.name,
        mistake.family,
        tuple(misses),
        findings,
        None,
        result.errors,
        facts,
        noise,
        mistake.direction,
        time_unjudged(mistake, result, pipeline),
    )
