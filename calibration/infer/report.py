"""`dslc infer --json`: every size measured, counted or flipped, and every candidate tried."""

from __future__ import annotations

from collections.abc import Sequence

from artifact.point import Point
from artifact.write import JsonObject, JsonValue
from calibration.infer.analyse import StageProposal, Switched
from calibration.infer.run import Inference
from calibration.infer.search import TermFit
from calibration.infer.shares import shares
from calibration.infer.time_terms import BYTES_WEIGHT, TOLERANCE_TEXT, TimeCheck, TimeSource
from runtime.estimate.fit import PhaseKind


def open_proposals(proposals: Sequence[StageProposal]) -> list[str]:
    """What the draft could not propose (`--strict` exits 5 on any): the same in every run, as
    the draft is (the measured times' check is not among them: it moves with the machine)."""
    out = []
    for p in proposals:
        name = p.plan.name
        if p.iterations.formula is None:
            out.append(f"{name}: no iteration formula")
        if p.memory.terms is None:
            out.append(f"{name}: no memory set")
        if p.time.source == TimeSource.MEMORY:
            out.append(f"{name}: time guessed from the memory's terms")
        for s in p.switches:
            if s.review:
                out.append(f"{name}: {', '.join(s.review)} at {s.at}: REVIEW")
            if s.failed:
                runs = "1 run" if s.failed == 1 else f"{s.failed} runs"
                out.append(f"{name}: {runs} at {s.at} failed")
    out += [f"{s.at} changed nothing" for s in unchanged_switches(proposals)]
    return out


def unchanged_switches(proposals: Sequence[StageProposal]) -> list[Switched]:
    """The bool params whose flip changed no stage at all (the call may not turn them on)."""
    return [
        s
        for k, s in enumerate(proposals[0].switches if proposals else ())
        if all(len(p.switches) > k and p.switches[k].unchanged for p in proposals)
    ]


def report(inference: Inference) -> JsonObject:
    """The JSON document: every size measured, every size whose work was counted (FLOPs +
    ``BYTES_WEIGHT`` x bytes per stage, in place of seconds), every size with a bool param
    flipped and every candidate tried."""
    opened: list[JsonValue] = list(open_proposals(inference.proposals))
    return {
        "pipeline": inference.pipeline,
        "base": dict(inference.base),
        "entry_points_that_ran": list(inference.ran),
        "sizes": [
            {
                "params": dict(m.record.params),
                "held_out": m.held_out,
                "measured_again": m.again,
                "ok": m.record.ok,
                "error": None if m.record.error is None else m.record.error.message,
                "stages": {
                    p.name: {
                        "peak_above_baseline": m.record.above_baseline(p.peak_allocated),
                        "seconds": p.duration_s,
                    }
                    for p in m.record.phases
                    if p.kind == PhaseKind.STAGE
                },
                "iterations": {s.stage: s.measured for s in m.record.stage_iterations},
            }
            for m in inference.measured
        ],
        "work_counted": [
            {
                "params": dict(r.params),
                "ok": r.ok,
                "stages": {p.name: p.duration_s for p in r.phases if p.kind == PhaseKind.STAGE},
                "iterations": {s.stage: s.measured for s in r.stage_iterations},
            }
            for r in inference.work
        ],
        "switched": [
            {
                "params": dict(r.params),
                "ok": r.ok,
                "error": None if r.error is None else r.error.message,
                "stages": {
                    p.name: {
                        "peak_above_baseline": r.above_baseline(p.peak_allocated),
                        "work": p.duration_s,
                    }
                    for p in r.phases
                    if p.kind == PhaseKind.STAGE
                },
                "iterations": {s.stage: s.measured for s in r.stage_iterations},
            }
            for r in (m.record for m in inference.switched)
        ],
        "default": dict(inference.default),
        "stages": [_stage(p, inference.default) for p in inference.proposals],
        "open": opened,
        "draft": inference.draft,
    }


def at_default(fit: TermFit, default: Point) -> list[JsonValue]:
    """Each term's (then the constant's) coefficient, value and part of the stage at the default
    workload: what the draft's comment gives."""
    return [
        {"term": s.text, "coefficient": s.coefficient, "value": s.value, "fraction": s.fraction}
        for s in (shares(fit, default) if default else ())
    ]


def _stage(p: StageProposal, default: Point) -> JsonObject:
    return {
        "name": p.plan.name,
        "uses": [u.text for u in p.plan.uses],
        "per_step": p.plan.stepped,
        "iterations": {
            "formula": p.iterations.formula,
            "tried": [{"candidate": t.text, "verdict": t.verdict} for t in p.iterations.tried],
        },
        "memory": _memory(p, default),
        "time": {
            "terms": [m.text for m in p.time.terms],
            "from": p.time.source,
            "work": {
                "unit": f"FLOPs + {BYTES_WEIGHT} x bytes read and written, per iteration",
                "sizes": p.time.work_sizes,
                "constant": p.time.work.constant if p.time.source != TimeSource.MEMORY else None,
                "slopes": list(p.time.work.slopes) if p.time.source != TimeSource.MEMORY else None,
                "largest_residual": p.time.work.residual
                if p.time.source != TimeSource.MEMORY
                else None,
                "sets_tried": p.time.work.tried,
                "at_default": at_default(p.time.work, default)
                if p.time.source != TimeSource.MEMORY
                else [],
                "rejected": list(p.time.work.rejected),
            },
            "measured": _measured(p.time.measured),
        },
        "switches": [
            {
                "param": w.param,
                "value_measured": w.value,
                "sizes": w.sizes,
                "iterations": w.iterations,
                "memory": w.memory,
                "time": w.time,
                "review": list(w.review),
                "unchanged": w.unchanged,
                "failed": w.failed,
            }
            for w in p.switches
        ],
    }


def _memory(p: StageProposal, default: Point) -> JsonObject:
    """The memory's proposal: its terms, fit, leave-one-out error and what it was chosen over."""
    return {
        "terms": None if p.memory.terms is None else [m.text for m in p.memory.terms],
        "constant": p.memory.constant,
        "slopes": list(p.memory.slopes),
        "largest_residual": p.memory.residual,
        "leave_one_out_error": p.memory.loo,
        "sets_as_good_weighed": p.memory.rivals,
        "approximate": p.approximate,
        "sets_tried": p.memory.tried,
        "at_default": at_default(p.memory, default),
        "rejected": list(p.memory.rejected),
        "moved_by": list(p.memory_moved_by),
        "probe_minimums": [
            {
                "param": r.param,
                "minimum": r.minimum,
                "off_the_fit": [dict(x) for x in r.dropped],
            }
            for r in p.regimes
        ],
    }


def _measured(check: TimeCheck) -> JsonObject:
    return {
        "checked": check.checked,
        "sizes": check.sizes,
        "base_spread": check.spread,
        "tolerance": TOLERANCE_TEXT,
        "constant": check.constant,
        "slopes": list(check.slopes),
        "largest_residual": check.residual,
        "largest_residual_over_tolerance": check.worst,
        "off_the_tolerance": [dict(x) for x in check.misses],
        "the_times_fit_instead": check.alternative,
        "rejected": [{"terms": r.text, "why": r.detail} for r in check.rejected],
    }
