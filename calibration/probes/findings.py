"""Do the measured sizes agree with the formulas? Findings, each with its consequence at the target.

Each stage's memory and time is fitted through its measured sizes and every other size is tested
against the fit (``calibration.probes.residuals``: a residual beyond what the measurement alone can
produce is evidence). The residual is carried to the target as a *risk* (bytes or seconds the
formula may miss by there: the residual grown by how much larger the stage's measure and the
direction it follows are at the target) and judged by its consequence, its *share* of the stage's
peak (memory) or of the request's time:

- *formula-mismatch* (actionable): a material residual (``MATERIAL``) that the sizes cannot put down
  to a probe below the steady regime: two sizes with the same terms measured differently, a size
  larger than a confirming one off the fit, or several sizes off with none confirming. It names the
  direction the unexplained part follows and what to change.
- *probe-regime*: only sizes smaller than every size that fits miss, and a size beside those the fit
  passes through confirms it: the small probes sat outside the formula's steady regime. They are
  left out of the estimate; declaring `probe X >= N` keeps later probes out of it.
- *unconfirmed*: only the smallest size misses and nothing confirms the fit yet; the loop adds a
  larger size (``calibration.calibrate.run``), so this is shown only when no size between the probe
  and the target could decide.
- *residual*: memory beyond the backend's granularity whose consequence at the target is immaterial
  (a scheduler's step arrays); not actionable: its risk is added to the stage's bound.
- *iteration-mismatch* (actionable): the recorder counted another number of iterations than the
  formula's at a measured size.
- *not-estimable* (actionable): a memory phase whose target term vector is not in the span of the
  measured sizes' (exact rational rank): a kink (``min``, ``max``, a clamp, an ``if`` threshold, a
  contract) between the probe and the target that no size within the cost budget crosses. The
  phase keeps its conservative (scaled) bound and its stage the fixed margin, never one from
  evidence.
- *far-axis* (a note): the target lies far past every measured size along a param some stage's
  memory grows in, and no size there was affordable (``calibration.probes.far``).
- *stage-not-measured* (actionable): a stage the formula runs never opened (its `uses` names a
  component or method that did not run), so its memory and time went to other phases unseen.

A time residual must exceed the noise in every run (``residuals.Z``) and be material: a time finding
that could flip between runs is noise, never a mismatch. A material one counts only on clean
evidence (``calibration.probes.time_evidence``: at least three runs of every size it rests on, its
residual beyond their spread); otherwise it is a *time-unknown* note, never an alarm.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Sequence

from artifact.point import Point
from calibration.probes.classify import classify
from calibration.probes.finding import ACTIONABLE, DETAIL, MATERIAL, NOTES, Checked, Finding, rank
from calibration.probes.residuals import StageFit, stage_fit, within_float
from calibration.probes.stage_checks import (
    iteration_findings,
    not_estimable_findings,
    unmeasured_findings,
)
from runtime import Pipeline
from runtime.estimate.fit.model import Modeler, Refit
from runtime.estimate.fit.noise import memory_slack
from runtime.estimate.peaks import phase_label
from runtime.kinds import FindingKind, PhaseKind, Quantity
from runtime.record import WarmupRecord

__all__ = [
    "ACTIONABLE",
    "DETAIL",
    "MATERIAL",
    "NOTES",
    "Checked",
    "Finding",
    "check",
    "classify",
    "iteration_findings",
    "not_estimable_findings",
    "rank",
    "unmeasured_findings",
]


def _fits(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    target: Point,
    backend: str,
    quantities: Collection[Quantity],
    modeler: Modeler,
) -> list[StageFit]:
    """Every stage's fits: memory one per phase and layout (records whose active components differ
    are never fitted together), time one per stage."""
    fits: list[StageFit] = []
    slack = memory_slack(backend)
    for stage in pipeline.stages:
        phases = {
            (p.kind, p.name, tuple(sorted(p.active_components)))
            for r in records
            if r.ok
            for p in r.phases
            if p.stage == stage
        }
        for kind, name, layout in sorted(phases, key=lambda k: (k[0] != PhaseKind.STAGE, k)):
            if Quantity.MEMORY not in quantities:
                break
            phase = (kind, name)
            fit = stage_fit(
                pipeline, records, stage, Quantity.MEMORY, target, slack, phase, layout, modeler
            )
            if fit is not None:
                fits.append(fit)
        if Quantity.TIME in quantities:
            fit = stage_fit(pipeline, records, stage, Quantity.TIME, target, slack, modeler=modeler)
            if fit is not None:
                fits.append(fit)
    return fits


def check(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    target: Point,
    backend: str,
    quantities: Collection[Quantity] = (Quantity.MEMORY, Quantity.TIME),
    modeler: Modeler | None = None,
    weights: int | None = None,
) -> Checked:
    """Every stage's memory and time (those in ``quantities``), and the counted iterations (with
    memory), checked; findings ranked by their share at the target (actionable first). Each
    stage is fitted through ``modeler`` (a calibration's cache reads a fit made before);
    ``weights``, the pipeline's weight bytes, make a memory share one of the stage's peak with
    every weight on the device, whatever the placement measured under held (``_unheld``)."""
    fits = _fits(pipeline, records, target, backend, quantities, modeler or Refit())
    at_target = pipeline.evaluate(**target)
    request = sum(
        max(f.at_target, 0.0)
        * within_float(at_target[f.stage].iterations, f"{f.stage}'s iterations", target)
        for f in fits
        if f.quantity == Quantity.TIME
    )
    found: list[Finding] = []
    if Quantity.MEMORY in quantities:
        found += unmeasured_findings(pipeline, records)
        found += iteration_findings(pipeline, records)
        found += not_estimable_findings(pipeline, fits, target)
    worst: dict[tuple[str, str], Finding] = {}  # one a stage and quantity: its worst phase's
    for fit in fits:
        iterations = int(at_target[fit.stage].iterations)
        scale = request
        if fit.quantity == Quantity.MEMORY:
            scale = _stage_peak(records, fit) + _unheld(records, fit, weights)
        finding = classify(pipeline, fit, target, scale, iterations)
        key = (fit.stage, fit.quantity)
        if finding is not None and (key not in worst or rank(finding) < rank(worst[key])):
            worst[key] = finding
    quiet = tuple(f for f in worst.values() if f.kind == FindingKind.RESIDUAL and f.share < DETAIL)
    found += [f for f in worst.values() if f not in quiet]
    found.sort(key=rank)
    return Checked(tuple(found), tuple(fits), quiet)


def _stage_peak(records: Sequence[WarmupRecord], fit: StageFit) -> float:
    """The stage's peak at the target: the fit above the baseline plus the typical baseline."""
    baselines = [r.baseline_allocated for r in records if r.ok]
    return fit.at_target + (statistics.median(baselines) if baselines else 0.0)


def _unheld(records: Sequence[WarmupRecord], fit: StageFit, weights: int | None) -> int:
    """The weights the phase's peaks left off the device, where the records show the placement
    moving them (under offload a peak holds a block or a component, or none): a share is of the
    peak with every weight there, as uncapped, so a placement never makes a residual material."""
    held = [p.weights_bytes for r in records if r.ok for p in r.phases]
    if weights is None or not held or None in held or len(set(held)) < 2:
        return 0
    ours = [
        p.weights_bytes or 0
        for r in records
        if r.ok
        for p in r.phases
        if phase_label(p.kind, p.name, p.stage) == fit.phase
    ]
    return max(0, weights - max(ours, default=weights))
