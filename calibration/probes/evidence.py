"""A bound as tight as the evidence allows: each stage's margin, and the risk findings add to it.

The fixed margin (``runtime.estimate.DEFAULT_MARGIN``, 1.2 on what is extrapolated) assumes nothing
about the formula. A stage earns a margin from evidence when the sizes say its terms explain every
measurement: every param the target departs in was moved by some size (``coverage``), a size beyond
those the fit passes through confirms the fit, and no finding on its memory is open. Its margin is
then ``1 + max(EVIDENCE_FLOOR, SAFETY x misfit) + PER_EFOLD x ln(reach)``, the misfit being the
largest residual at a confirming size relative to the fit's growing part there (0 on the exact CPU
backend when the formula is right) and the reach how far the target's growing part lies beyond the
largest measured one: the growing part extrapolated to the target may be off by that share, more
the farther it goes, and the allocator's granularity is already in the residuals it allows
(``runtime.estimate.fit.noise.memory_slack``).
Elsewhere the fixed margin stays. A memory finding's risk (the bytes the formula may miss by at
the target) is added to its stage's bounds, so a residual too small to act on never leaves a bound
under the peak.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from attrs import evolve, frozen

from calibration.probes.findings import Checked, Finding
from calibration.probes.residuals import StageFit
from runtime import Pipeline
from runtime.estimate import PeakEstimate, PhaseEstimate, WorkloadEstimate
from runtime.kinds import FindingKind, MarginSource, Quantity

#: The least padding of a confirmed stage's growing part: a first-draft formula's raw error on
#: families never seen is within half a percent (bench/README.md); four times that.
EVIDENCE_FLOOR = 0.02
#: How many times the largest relative misfit at a confirming size the padding covers.
SAFETY = 2.0
#: Padding added per e-fold the target's growing part lies beyond the largest size's: sizes that
#: lie on a plane say nothing of a curvature past them (the tiny Wan transformer's memory was
#: exactly linear in tokens up to 12 and 5.2 % of its growth above the line at 36).
PER_EFOLD = 0.04
#: Memory findings whose risk is added to the stage's bounds.
AT_RISK = frozenset({FindingKind.RESIDUAL, FindingKind.FORMULA_MISMATCH, FindingKind.UNCONFIRMED})


@frozen
class StageMargin:
    """The margin a stage's phases got, where it came from, and why."""

    stage: str
    margin: float
    source: MarginSource
    reason: str


def stage_margins(
    pipeline: Pipeline, checked: Checked, uncovered: Sequence[str], fixed: float
) -> tuple[StageMargin, ...]:
    """Each stage's margin: from the evidence where it suffices, else ``fixed``."""
    out = []
    for stage in pipeline.stages:
        fits = checked.fits_of(stage, Quantity.MEMORY)
        open_ = [
            f.kind
            for f in checked.findings
            if f.stage == stage
            and f.quantity in (Quantity.MEMORY, Quantity.ITERATIONS)
            and f.kind != FindingKind.RESIDUAL
        ]
        reason = ""
        if uncovered:
            reason = f"no size moved {', '.join(uncovered)}"
        elif open_:
            reason = f"a {open_[0]} finding is open"
        elif not fits:
            reason = "fewer than two sizes measured"
        elif any(f.unconfirmed for f in fits):
            reason = "no size beyond those the fit passes through tests it"
        if reason:
            out.append(StageMargin(stage, fixed, MarginSource.FIXED, reason))
            continue
        noted = any(
            f.stage == stage and f.kind == FindingKind.RESIDUAL
            for f in (*checked.findings, *checked.quiet)
        )
        # a residual's own risk is added instead (with_risks)
        misfit = 0.0 if noted else max(_misfit(f) for f in fits)
        far = max(reach(f) for f in fits)
        margin = 1 + max(EVIDENCE_FLOOR, SAFETY * misfit) + PER_EFOLD * math.log(far)
        if margin >= fixed:
            out.append(
                StageMargin(
                    stage, fixed, MarginSource.FIXED, f"the misfit {misfit:.2%} is too large"
                )
            )
            continue
        sizes = max(len(f.beyond) for f in fits)
        why = f"{sizes} size{'s' if sizes > 1 else ''} beyond the fit confirm it"
        why += " (its residual's risk added" if noted else f" (misfit {misfit:.3%}"
        why += f", the target {far:.3g}x the largest size's growth)"
        out.append(StageMargin(stage, margin, MarginSource.EVIDENCE, why))
    return tuple(out)


def reach(fit: StageFit) -> float:
    """How far the target's growing part lies beyond the largest measured one (at least 1)."""
    largest = max(fit.growing, default=0.0)
    return max(1.0, fit.growing_at_target / largest) if largest > 0 else 1.0


def _misfit(fit: StageFit) -> float:
    """The largest residual at a size beyond the fit, relative to the fit's growing part there."""
    return max(
        (abs(fit.points[i].residual) / fit.growing[i] for i in fit.beyond if fit.growing[i] > 0),
        default=0.0,
    )


def _ceil(value: float) -> int:
    return int(-(-value // 1))


def _padded(peak: PeakEstimate, risk: float, why: str) -> PeakEstimate:
    if peak.bound_bytes is None or risk <= 0:
        return peak
    return evolve(
        peak,
        bound_bytes=peak.bound_bytes + _ceil(risk),
        reason=f"{peak.reason}; plus {_ceil(risk)} B at risk ({why})",
    )


def with_risks(result: WorkloadEstimate, findings: Sequence[Finding]) -> WorkloadEstimate:
    """The estimate with each memory finding's risk added to its stage's bounds (and the
    request's, when that stage dominates it or a phase's bound now exceeds it)."""
    risks: dict[str, Finding] = {}
    for f in findings:
        at_risk = f.quantity == Quantity.MEMORY and f.kind in AT_RISK
        if at_risk and (f.stage not in risks or f.risk > risks[f.stage].risk):
            risks[f.stage] = f
    if not risks:
        return result
    phases: list[PhaseEstimate] = []
    for p in result.phases:
        found = risks.get(p.stage) if p.stage is not None else None
        peak = p.peak if found is None else _padded(p.peak, found.risk, found.kind)
        phases.append(evolve(p, peak=peak))
    request = result.request_peak
    dominant = risks.get(request.stage) if request.stage is not None else None
    if dominant is not None:
        request = _padded(request, dominant.risk, dominant.kind)
    highest = max((p.peak.bound_bytes or 0 for p in phases), default=0)
    if request.bound_bytes is not None and highest > request.bound_bytes:
        request = evolve(request, bound_bytes=highest)
    return evolve(result, phases=tuple(phases), request_peak=request)
