"""A bound as tight as the evidence allows: each stage's margin, and the risk findings add to it.

Each phase's bound is its prediction plus what the evidence leaves uncertain: the risk of the
stage's memory finding (the bytes the formula may miss by at the target, ``Finding.risk``: the
largest residual, the spread of the fit at the target and the change an explaining term makes
there), the spread of a confirmed fit (``SAFETY x misfit`` of its growing part, the misfit being the
largest residual at a size beyond the fit relative to the growing part there: 0 on the exact CPU
backend when the formula is right) and a model error that grows with the distance from the
measured sizes (``PER_EFOLD x ln(reach)`` of the growing part, the reach how far the target's
growing part lies beyond the largest measured one: sizes on a plane say nothing of a curvature
past them), never under ``EVIDENCE_FLOOR``. So the margin on the growing part is ``1 +
max(EVIDENCE_FLOOR, SAFETY x misfit) + PER_EFOLD x ln(reach)``; where a finding's risk is added
instead, the misfit is 0 (the risk covers the residuals). The floor stands for an unquantified raw
error and the risk quantifies it, so the two are not added: the stage's bounds get what the risk
exceeds the floor's bytes by (``StageMargin.floor_bytes``: the floor on the smallest growing part
of the stage's phases at the target, so every phase's padding is at least the risk), and the
margin keeps the whole floor. The margin never depends on the risk: it multiplies each request's
growing part while the risk's bytes are added alike at every request (the serving predictor's
``risk_bytes``), and a margin less the risk's share would narrow the bound beyond the target as the
risk grew (the served re-fit's decode came out 120 B wider at four times the target's area when
its risk fell from 48 B to 8 B). So the bound is flat in the risk while the risk is under the
floor, grows with it byte for byte above, and never falls as it grows, at any request; a 1 %
risk costs about 1 %.

The fixed margin (``runtime.estimate.DEFAULT_MARGIN``, 1.2 on what is extrapolated) assumes
nothing about the formula; it stays only where nothing is estimable: a param the target departs in
that no size moved (``coverage``), fewer than two sizes, no size beyond those the fit passes
through, a finding whose consequence is not quantified (iterations, a stage not measured, a term
not estimable, an unconfirmed fit), or an evidence margin not under it. A stage whose margin
rests on an open finding's risk (a formula-mismatch, a probe-regime) says so
(``MarginSource.RISK``). The allocator's granularity is already in the residuals a fit allows
(``runtime.estimate.fit.noise.memory_slack``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from attrs import evolve, frozen

from artifact.units import show_bytes
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
#: Memory findings whose risk quantifies what the formula may miss by at the target: their stage
#: keeps the margin from evidence, and the risk is added to its bounds (a 1 % risk costs 1 %).
QUANTIFIED = frozenset(
    {FindingKind.RESIDUAL, FindingKind.FORMULA_MISMATCH, FindingKind.PROBE_REGIME}
)
#: Memory findings whose risk is added to the stage's bounds (an unconfirmed fit's on the fixed
#: margin: nothing tests the fit, so its risk is not all it may miss by).
AT_RISK = QUANTIFIED | {FindingKind.UNCONFIRMED}


@frozen
class StageMargin:
    """The margin a stage's phases got, where it came from, and why."""

    stage: str
    margin: float
    source: MarginSource
    reason: str
    risk_bytes: int = 0  # what ``with_risks`` adds to its phases' bounds: the risk beyond the floor
    floor_bytes: float = 0.0  # the floor's bytes at the target a finding's risk takes the place of


def _fixed_because(
    stage: str, checked: Checked, uncovered: Sequence[str], fits: Sequence[StageFit]
) -> str:
    """Why nothing about the stage is estimable (its margin is the fixed one), or "" when it is."""
    open_ = [
        f.kind
        for f in checked.findings
        if f.stage == stage
        and f.quantity in (Quantity.MEMORY, Quantity.ITERATIONS)
        and not (f.quantity == Quantity.MEMORY and f.kind in QUANTIFIED)
    ]
    if uncovered:
        return f"no size moved {', '.join(uncovered)}"
    if open_:
        return f"a {open_[0]} finding is open"
    if not fits:
        return "fewer than two sizes measured"
    if any(f.unconfirmed for f in fits):
        return "no size beyond those the fit passes through tests it"
    return ""


def _quantified(stage: str, checked: Checked) -> Finding | None:
    """The stage's memory finding of the largest quantified risk (reported or quiet), if any."""
    found = [
        f
        for f in (*checked.findings, *checked.quiet)
        if f.stage == stage and f.quantity == Quantity.MEMORY and f.kind in QUANTIFIED
    ]
    return max(found, key=lambda f: f.risk, default=None)


def stage_margins(
    pipeline: Pipeline, checked: Checked, uncovered: Sequence[str], fixed: float
) -> tuple[StageMargin, ...]:
    """Each stage's margin: from the evidence where it suffices (a quantified finding's risk is
    added to its bounds by ``with_risks``, not folded into the margin), else ``fixed``."""
    out = []
    for stage in pipeline.stages:
        fits = checked.fits_of(stage, Quantity.MEMORY)
        reason = _fixed_because(stage, checked, uncovered, fits)
        if reason:
            out.append(StageMargin(stage, fixed, MarginSource.FIXED, reason))
            continue
        found = _quantified(stage, checked)
        # a finding's own risk is added instead (with_risks): it already covers the residuals
        misfit = 0.0 if found is not None else max(_misfit(f) for f in fits)
        far = max(reach(f) for f in fits)
        margin = 1 + max(EVIDENCE_FLOOR, SAFETY * misfit) + PER_EFOLD * math.log(far)
        if margin >= fixed:
            why = f"the evidence's margin {margin:.3g} (misfit {misfit:.2%}, the target {far:.3g}x"
            why += f" the largest size's growth) is not under the fixed {fixed:.3g}"
            out.append(StageMargin(stage, fixed, MarginSource.FIXED, why))
            continue
        sizes = max(len(f.beyond) for f in fits)
        why = f"{sizes} size{'s' if sizes > 1 else ''} beyond the fit "
        why += "measure it" if found is not None else "confirm it"
        if found is None:
            why += f" (misfit {misfit:.3%}"
        else:
            why += f" (its {found.kind} finding's risk, {show_bytes(found.risk)}, added"
        why += f", the target {far:.3g}x the largest size's growth)"
        source = MarginSource.EVIDENCE
        if found is not None and found.kind != FindingKind.RESIDUAL:
            source = MarginSource.RISK
        floor = 0.0 if found is None else EVIDENCE_FLOOR * _least_growing(fits)
        out.append(StageMargin(stage, margin, source, why, floor_bytes=floor))
    return tuple(out)


def _least_growing(fits: Sequence[StageFit]) -> float:
    """The smallest growing part at the target of a stage's phases (0 where one does not grow):
    the floor pads every phase by at least ``EVIDENCE_FLOOR`` times it."""
    return max(0.0, min((f.growing_at_target for f in fits), default=0.0))


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


def stage_risks(findings: Sequence[Finding]) -> dict[str, Finding]:
    """Each stage's largest memory finding at risk: the one whose risk its bounds carry."""
    risks: dict[str, Finding] = {}
    for f in findings:
        at_risk = f.quantity == Quantity.MEMORY and f.kind in AT_RISK
        if at_risk and (f.stage not in risks or f.risk > risks[f.stage].risk):
            risks[f.stage] = f
    return risks


def with_margin_risks(
    margins: Sequence[StageMargin], findings: Sequence[Finding]
) -> tuple[StageMargin, ...]:
    """``margins`` with the bytes ``with_risks`` adds to each stage's bounds, so that a reader of
    the margins alone (a saved document, a serving predictor) bounds as the estimate does."""
    added = _added(findings, margins)
    return tuple(
        evolve(m, risk_bytes=_ceil(added[m.stage][0])) if m.stage in added else m for m in margins
    )


def _added(
    findings: Sequence[Finding], margins: Sequence[StageMargin]
) -> dict[str, tuple[float, str]]:
    """Each stage's bytes at risk beyond its floor's (``StageMargin.floor_bytes``), and why."""
    floors = {m.stage: m.floor_bytes for m in margins}
    return {
        s: (max(0.0, f.risk - floors.get(s, 0.0)), f.kind) for s, f in stage_risks(findings).items()
    }


def with_risks(
    result: WorkloadEstimate, findings: Sequence[Finding], margins: Sequence[StageMargin]
) -> WorkloadEstimate:
    """The estimate with each memory finding's risk beyond its stage's floor (``margins``'s)
    added to its stage's bounds (and the request's, when that stage dominates it
    or a phase's bound now exceeds it)."""
    return with_stage_risks(result, _added(findings, margins))


def with_stage_risks(
    result: WorkloadEstimate, risks: Mapping[str, tuple[float, str]]
) -> WorkloadEstimate:
    """The estimate with ``risks`` (bytes and why, by stage) added to its stages' bounds (and the
    request's, when that stage dominates it or a phase's bound now exceeds it)."""
    if not risks:
        return result
    phases: list[PhaseEstimate] = []
    for p in result.phases:
        found = risks.get(p.stage) if p.stage is not None else None
        peak = p.peak if found is None else _padded(p.peak, *found)
        phases.append(evolve(p, peak=peak))
    request = result.request_peak
    dominant = risks.get(request.stage) if request.stage is not None else None
    if dominant is not None:
        request = _padded(request, *dominant)
    highest = max((p.peak.bound_bytes or 0 for p in phases), default=0)
    if request.bound_bytes is not None and highest > request.bound_bytes:
        request = evolve(request, bound_bytes=highest)
    return evolve(result, phases=tuple(phases), request_peak=request)
