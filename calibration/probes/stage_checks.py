"""Findings about a stage as a whole, beside its residuals: iterations counted other than the
formula's, a stage that never opened, a memory phase the sizes do not determine at the target."""

from __future__ import annotations

from collections.abc import Sequence

from artifact.point import Point
from artifact.spelling import point_text
from calibration.probes.finding import Finding
from calibration.probes.policy import memory_terms
from calibration.probes.residuals import StageFit
from runtime import Pipeline
from runtime.estimate.fit.exact import estimable, row
from runtime.kinds import FindingKind, Quantity
from runtime.record import WarmupRecord


def iteration_findings(pipeline: Pipeline, records: Sequence[WarmupRecord]) -> list[Finding]:
    """Stages whose counted iterations differ from the formula's at a measured size."""
    out: dict[str, Finding] = {}
    for record in records:
        if not record.ok:
            continue
        values = pipeline.evaluate(**record.params)
        for pair in record.stage_iterations:
            if pair.source != "counted" or pair.stage not in values or pair.stage in out:
                continue
            declared = int(values[pair.stage].iterations)
            if pair.measured != declared:
                at = point_text(record.params)
                depends = [
                    name
                    for name, default in pipeline.default_workload.items()
                    if name in record.params
                    and record.params[name] != default
                    and pipeline.is_admissible(**{**record.params, name: default})
                    and pipeline.evaluate(**{**record.params, name: default})[pair.stage].iterations
                    != declared
                ]
                out[pair.stage] = Finding(
                    FindingKind.ITERATION_MISMATCH,
                    pair.stage,
                    Quantity.ITERATIONS,
                    f"{pair.stage}: the pipeline ran {pair.measured} iterations at {at}, the "
                    f"formula says {declared}; every per-iteration figure at the target is off by "
                    "as much",
                    (),
                    ", ".join(depends) or None,
                    risk=float(abs(pair.measured - declared)),
                    share=abs(pair.measured - declared) / max(declared, 1),
                    next_step=f"fix {pair.stage}'s `iterations =` in the formula file",
                )
    return list(out.values())


def unmeasured_findings(pipeline: Pipeline, records: Sequence[WarmupRecord]) -> list[Finding]:
    """Stages the formula runs that never opened in any request: their `uses` named something that
    did not run, so their memory and time went to other phases unseen."""
    ran = {p.stage for r in records if r.ok for p in r.phases if p.stage is not None}
    out = []
    for stage in pipeline.stages:
        if stage in ran:
            continue
        runs = [r for r in records if r.ok and pipeline.evaluate(**r.params)[stage].iterations > 0]
        if not runs:
            continue
        uses = ", ".join(f"{u.component}.{u.method}" for u in pipeline.uses.get(stage, ()))
        out.append(
            Finding(
                FindingKind.STAGE_NOT_MEASURED,
                stage,
                Quantity.MEMORY,
                f"{stage}: the formula runs it in every request measured, but what it `uses` "
                f"({uses or 'nothing'}) never ran: nothing was measured for it, and its memory "
                "and time were counted in other phases",
                (),
                share=1.0,  # the stage's whole figure is unknown
                next_step=f"name the component and method that run {stage} in its `uses` line",
            )
        )
    return out


def not_estimable_findings(
    pipeline: Pipeline, fits: Sequence[StageFit], target: Point
) -> list[Finding]:
    """Memory phases whose target term vector is not in the span of their sizes' (exact rank): a
    ``min``/``max``/clamp/``if`` threshold or a contract between the probe and the target that no
    size crosses. The estimate keeps its conservative bound; the stage gets no evidence margin."""
    out: dict[str, Finding] = {}
    for fit in fits:
        if fit.quantity != Quantity.MEMORY or fit.estimable or fit.stage in out:
            continue
        moved = [
            name
            for name, value in target.items()
            if any(p.params[name] != value for p in fit.points)
            and _closes(pipeline, fit, name, target)
        ]
        along = ", ".join(moved) or "the params the target departs in"
        out[fit.stage] = Finding(
            FindingKind.NOT_ESTIMABLE,
            fit.stage,
            Quantity.MEMORY,
            f"{fit.stage} memory ({fit.phase}): the measured sizes do not determine its terms at "
            f"the target (the target's term vector is not in the span of theirs: a min, max, "
            f"clamp, if or contract along {along} that no size crosses within the cost budget); "
            "its bound is the conservative scaled one, with the fixed margin and no evidence",
            fit.points,
            along,
            share=1.0,
            next_step=f"measure a size past the kink along {along}: a --probe nearer the target",
        )
    return list(out.values())


def _closes(pipeline: Pipeline, fit: StageFit, name: str, target: Point) -> bool:
    """Whether the largest size with ``name`` moved alone to the target's value would determine
    the target (the kink lies along ``name``)."""
    moved = {**fit.points[0].params, name: target[name]}
    if not pipeline.is_admissible(**moved):
        return False
    rows = [row(p.terms) for p in fit.points]
    rows.append(row(memory_terms(pipeline, fit.stage, moved)))
    return estimable(rows, row(fit.target_terms))
