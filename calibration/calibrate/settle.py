"""What the records of a calibration say so far (``settle``): the checks, the sizes in the formulas'
regime, each stage's margin and the estimate; memory from the sizes chosen without a clock only.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import evolve, frozen

from artifact.point import Point
from calibration.core.session import Session
from calibration.probes.evidence import (
    StageMargin,
    stage_margins,
    with_margin_risks,
    with_risks,
)
from calibration.probes.findings import Checked, Finding, check, rank
from calibration.probes.policy import open_stages
from runtime import Pipeline
from runtime.estimate import WorkloadEstimate, estimate, estimate_timing
from runtime.estimate.fit.model import FitCache, Modeler
from runtime.kinds import EARNED, FindingKind, Quantity
from runtime.record import WarmupRecord

MEMORY, TIME = Quantity.MEMORY, Quantity.TIME


@frozen
class Settled:
    """What the records say so far: the checks, the records to estimate from and the estimate."""

    checked: Checked
    findings: tuple[Finding, ...]
    kept: tuple[WarmupRecord, ...]
    estimate: WorkloadEstimate
    margins: tuple[StageMargin, ...]
    timed: tuple[WarmupRecord, ...] = ()  # the runs of sizes chosen for time

    @property
    def for_time(self) -> tuple[WarmupRecord, ...]:
        """Every record the time estimate used."""
        return (*self.kept, *self.timed)


def settle(
    session: Session,
    records: Sequence[WarmupRecord],
    target: Point,
    margin: float,
    uncovered: Sequence[str],
    timed: Sequence[WarmupRecord] = (),
    modeler: Modeler | None = None,
) -> Settled:
    """Check the records, leave out the sizes a memory finding puts outside the formulas' regime,
    give each stage its margin (evidence, risk or fixed) and estimate, with the findings' risks
    added.

    ``timed`` are the runs of sizes chosen for time (from measured times, so from a clock): they
    join the time checks and the time estimate only, so that no memory figure depends on a clock."""
    pipeline, backend = session.formulas, session.recorder.backend.name
    modeler = modeler or FitCache()
    weights = sum(session.weights.values())
    everything = check(pipeline, records, target, backend, modeler=modeler, weights=weights)
    kept = in_regime(pipeline, records, everything.findings, target)
    fitted = _first_request_ahead(records, kept)
    checked = (
        everything
        if len(kept) == len(records)
        else check(pipeline, fitted, target, backend, modeler=modeler, weights=weights)
    )
    if timed:
        both = [*fitted, *timed]
        checked = _with_time(checked, check(pipeline, both, target, backend, (TIME,), modeler))
    regime = [f for f in everything.findings if f.kind == FindingKind.PROBE_REGIME]
    rest = (f for f in checked.findings if f.kind != FindingKind.PROBE_REGIME)
    findings = tuple(sorted([*regime, *rest], key=rank))
    margins = stage_margins(pipeline, checked, uncovered, margin)
    result = estimate(
        kept,
        pipeline,
        target=target,
        margin=margin,
        component_weight_bytes=session.weights,
        stage_margins={m.stage: m.margin for m in margins if m.source in EARNED},
        modeler=modeler,
    )
    if timed:
        timing = estimate_timing([*kept, *timed], pipeline, target, modeler)
        result = evolve(result, timing=timing)
    at_risk = (*checked.findings, *checked.quiet)
    risks = with_risks(result, at_risk, margins)
    margins = with_margin_risks(margins, at_risk)
    return Settled(checked, findings, tuple(kept), risks, margins, tuple(timed))


def _first_request_ahead(
    records: Sequence[WarmupRecord], kept: Sequence[WarmupRecord]
) -> list[WarmupRecord]:
    """``kept`` with the session's first request still first: the checks never fit the first
    record (it pays one-time costs), so leaving it out of the regime must not make the next one
    (a size measured once so far) first in its place."""
    if not records or (kept and kept[0] is records[0]):
        return list(kept)
    return [records[0], *kept]


def _with_time(memory: Checked, time: Checked) -> Checked:
    """The memory checks of ``memory`` with the time checks of ``time``."""
    findings = [
        *(f for f in memory.findings if f.quantity != TIME),
        *(f for f in time.findings if f.quantity == TIME),
    ]
    fits = [*(f for f in memory.fits if f.quantity != TIME), *time.fits]
    return Checked(tuple(sorted(findings, key=rank)), tuple(fits), memory.quiet)


def fixed_margin_bounds(
    session: Session,
    settled: Settled,
    target: Point,
    margin: float,
    modeler: Modeler | None = None,
) -> dict[str, int | None]:
    """Each phase's bound (and the request's, as "request") with the fixed margin alone, on the
    same records: what the margins from evidence are compared with (the settled peak fits and time
    planes read from ``modeler``: the fixed margin applied to the same fits, not to new ones)."""
    fixed = estimate(
        settled.kept,
        session.formulas,
        target=target,
        margin=margin,
        component_weight_bytes=session.weights,
        modeler=modeler,
    )
    bounds = {p.label: p.peak.bound_bytes for p in fixed.phases}
    bounds["request"] = fixed.request_peak.bound_bytes
    return bounds


def median_run(runs: Sequence[WarmupRecord]) -> WarmupRecord:
    """The successful run of median duration (the lower middle of an even count), else the first:
    the estimators predict medians, so that is what a prediction is checked against."""
    ok = sorted((r for r in runs if r.ok), key=lambda r: r.duration_s)
    return ok[(len(ok) - 1) // 2] if ok else runs[0]


def in_regime(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    findings: Sequence[Finding],
    target: Point,
) -> list[WarmupRecord]:
    """The records to estimate from: without the sizes a memory finding puts outside the formulas'
    regime, as long as the rest still determine every term the records determined."""
    left_out = [
        dict(p)
        for f in findings
        if f.kind in (FindingKind.PROBE_REGIME, FindingKind.UNCONFIRMED) and f.quantity == MEMORY
        for p in f.out_of_regime
    ]
    kept = [r for r in records if dict(r.params) not in left_out]
    points = [dict(r.params) for r in records if r.ok]
    kept_points = [dict(r.params) for r in kept if r.ok]
    if not kept_points or set(open_stages(pipeline, kept_points, target)) - set(
        open_stages(pipeline, points, target)
    ):
        return list(records)
    return kept
