"""What `dslc calibrate` prints: the --json document and the human tables (data only, no I/O).

The JSON document is documented in docs/estimators.md; ``DOCUMENT_VERSION`` changes when a key is
removed or changes meaning (new keys may appear at any time).
"""

from __future__ import annotations

from fractions import Fraction

from artifact.units import show_bytes, show_seconds
from artifact.write import JsonObject
from calibration.calibrate.run import Calibration, Comparison
from calibration.calibrate.verdict import verdict
from runtime.kinds import Method

DOCUMENT_VERSION = 1


def _number(value: Fraction | float | None) -> int | float | None:
    if value is None:
        return None
    if isinstance(value, Fraction):
        exact = value.denominator == 1 or abs(value) >= 1 << 53  # past 2**53: an int is as exact
        return round(value) if exact else float(value)
    return value


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _error(c: Comparison) -> float | None:
    return None if c.error is None else round(c.error, 5)


def document(cal: Calibration, *, strict: bool = False) -> JsonObject:
    """The --json document (its verdict as ``dslc calibrate`` with or without --strict)."""
    return {
        **_verdict_part(cal, strict),
        **_request_part(cal),
        **_memory_part(cal),
        **_time_part(cal),
        **_sizes_part(cal),
        **_findings_part(cal),
    }


def _verdict_part(cal: Calibration, strict: bool) -> JsonObject:
    """Whether it holds, as the CLI's verdict line and exit status say."""
    judged = verdict(cal, strict=strict)
    return {
        "verdict": {
            "holds": judged.holds,
            "exit_status": judged.status,
            "memory": judged.memory,
            "time": judged.time,
            "time_check": judged.time_check.value,
            "findings": judged.findings,
            "line": judged.line,
        },
    }


def _request_part(cal: Calibration) -> JsonObject:
    """What was calibrated, at which shapes, and every recorded request."""
    return {
        "version": DOCUMENT_VERSION,
        "example": cal.example,
        "pipeline": cal.pipeline,
        "formulas": cal.formula_path,
        "device": cal.device,
        "backend": cal.backend,
        "margin": cal.estimate.margin,
        "warmup": dict(cal.shapes.warmup),
        "probe": dict(cal.shapes.probe),
        "second_probe": None if cal.second_probe is None else dict(cal.second_probe),
        "target": dict(cal.shapes.target),
        "work_ratio": _number(cal.work_ratio),
        "verified": cal.measured is not None,
        "records": [
            {
                "role": role,
                "params": dict(r.params),
                "ok": r.ok,
                "error": None if r.error is None else f"{r.error.type}: {r.error.message}",
                "baseline_bytes": r.baseline_allocated,
                "peak_bytes": r.peak_allocated,
                "duration_ms": _ms(r.duration_s * 1e3),
                "estimated": any(r is k for k in cal.kept),  # a predictor re-fits from these
            }
            for role, r in zip(cal.roles, cal.records)
        ],
    }


def _memory_part(cal: Calibration) -> JsonObject:
    """Each phase's peak and the request's: predicted, bound, measured; the request's time."""
    est = cal.estimate
    peak, time = cal.request_peak(), cal.request_time()
    sources = {m.stage: m.source for m in cal.margins}
    return {
        "phases": [
            {
                "label": p.label,
                "kind": p.kind,
                "name": p.name,
                "stage": p.stage,
                "active_components": list(p.active_components),
                "method": p.peak.method,
                "reason": p.peak.reason,
                "margin": p.peak.margin,
                "margin_source": _margin_source(p.peak.method, sources.get(p.stage or "")),
                "fixed_margin_bound_bytes": cal.fixed_bounds.get(p.label),
                "predicted_peak_bytes": c.predicted,
                "bound_peak_bytes": c.bound,
                "measured_peak_bytes": c.measured,
                "error": _error(c),
                "weights_bytes": cal.phase_weights.get(p.label),
            }
            for p, c in zip(est.phases, cal.phases())
        ],
        "request": {
            "peak_method": peak.method,
            "peak_reason": peak.reason,
            "predicted_peak_bytes": peak.predicted,
            "bound_peak_bytes": peak.bound,
            "fixed_margin_bound_bytes": cal.fixed_bounds.get("request"),
            "measured_peak_bytes": peak.measured,
            "peak_error": _error(peak),
            "time_method": time.method,
            "time_reason": time.reason,
            "predicted_ms": _ms(time.predicted),
            "two_sigma_ms": _two_sigma(est.timing.spread_s),
            "measured_ms": _ms(time.measured),
            "time_error": _error(time),
        },
    }


def _time_part(cal: Calibration) -> JsonObject:
    """Time per stage, layer uses, growth and failed requests."""
    est = cal.estimate
    return {
        "stages": [
            {
                "stage": c.label,
                "method": c.method,
                "reason": c.reason,
                "target_iterations": s.target_iterations,
                "predicted_ms": _ms(c.predicted),
                "two_sigma_ms": _two_sigma(s.spread_s),
                "measured_ms": _ms(c.measured),
                "error": _error(c),
            }
            for s, c in zip(est.timing.stages, cal.stage_times())
        ],
        "layer_uses": [
            {
                "component": u.component,
                "layer": u.layer,
                "stage": u.stage,
                "calls": u.calls,
                "measured_calls": u.measured_calls,
                "method": u.method,
            }
            for u in est.layer_uses
        ],
        "growth": [
            {
                "stage": g.stage,
                "bytes_per_iteration": _number(g.bytes_per_iteration),
                "extrapolated_peak_bytes": g.extrapolated_peak_bytes,
            }
            for g in est.growth
        ],
        "errors": list(cal.errors),
    }


def _sizes_part(cal: Calibration) -> JsonObject:
    """The extra sizes with why and their cost, each stage's margin, what no size moved."""
    return {
        "extra_probes": [dict(e.point) for e in cal.extras],
        "extra_sizes": [
            {"params": dict(e.point), "why": e.reason, "cost": round(e.cost, 5)} for e in cal.extras
        ],
        "extra_cost": round(cal.extra_cost, 5),
        "margins": [
            {
                "stage": m.stage,
                "margin": m.margin,
                "source": m.source,
                "reason": m.reason,
                "risk_bytes": m.risk_bytes,
            }
            for m in cal.margins
        ],
        "uncovered": list(cal.uncovered),
        "notices": [*cal.notices, *cal.call_warnings],
    }


def _calibrated_under(cal: Calibration) -> JsonObject:
    """The placement measured under and the cap; under a saved plan, its file and placement."""
    under: JsonObject = {"offload": cal.offload, "capacity_bytes": cal.capacity}
    if cal.saved_plan is not None:
        under.update(plan_file=cal.saved_plan.path, placement=dict(cal.saved_plan.placement()))
    return under


def _findings_part(cal: Calibration) -> JsonObject:
    """The findings and the planner's inputs (weights, layers)."""
    return {
        "findings": [
            {
                "kind": f.kind,
                "stage": f.stage,
                "quantity": f.quantity,
                "direction": f.direction,
                "actionable": f.actionable,
                "risk": f.risk,
                "share": f.share,
                "message": f.message,
                "next_step": f.next_step,
                "points": [
                    {"params": dict(p.params), "value": p.value, "fit": p.predicted}
                    for p in f.points
                ],
            }
            for f in cal.findings
        ],
        "undeclared_components": list(cal.undeclared),
        "unobserved_components": list(cal.unobserved),
        "calibrated_under": _calibrated_under(cal),
        "below_minimum": [
            {
                "role": b.role,
                "axis": b.axis,
                "value": b.value,
                "minimum": b.minimum,
                "message": b.message,
            }
            for b in cal.below_minimum
        ],
        "component_weight_bytes": dict(cal.component_weight_bytes),
        "layer_bytes": {c: dict(per) for c, per in cal.layer_bytes.items()},
        "group_bytes": {c: list(sizes) for c, sizes in cal.group_bytes.items()},
    }


def _margin_source(method: str, source: str | None) -> str | None:
    """Which margin a phase's bound got: "evidence", "risk", "fixed", or None where nothing is
    padded."""
    return source if method in (Method.FIT, Method.SCALED) else None


def show_ratio(value: Fraction) -> str:
    """A ratio for people (``1.88e+24``); one past a float's range by its size."""
    try:
        return f"{float(value):.3g}"
    except OverflowError:
        return f"~2**{int(value).bit_length() - 1}"


def show_ms(value: float | None) -> str:
    """A time given in milliseconds, through the one formatter of units."""
    return show_seconds(None if value is None else value / 1e3)


def show_error(c: Comparison) -> str:
    return "-" if c.error is None else f"{c.error * 100:+.1f}%"


def memory_rows(cal: Calibration) -> list[list[str]]:
    """phase, method, margin, predicted, bound, measured, error, bound ok."""
    sources = {m.stage: m.source for m in cal.margins}
    rows = []
    stages = [p.stage for p in cal.estimate.phases] + [cal.estimate.request_peak.stage]
    margins = [p.peak for p in cal.estimate.phases] + [cal.estimate.request_peak]
    for c, stage, peak in zip([*cal.phases(), cal.request_peak()], stages, margins):
        ok = (
            "-"
            if c.bound is None or c.measured is None
            else ("yes" if c.bound >= c.measured else "NO")
        )
        source = _margin_source(c.method, sources.get(stage or ""))
        rows.append(
            [
                c.label,
                c.method,
                "-" if source is None else f"{source} {peak.margin:.3g}",
                show_bytes(c.predicted),
                show_bytes(c.bound),
                show_bytes(c.measured),
                show_error(c),
                ok,
            ]
        )
    return rows


def _two_sigma(spread_s: float | None) -> float | None:
    """Two sigma of a time figure in milliseconds (None: unknown, e.g. scaled from one size)."""
    return None if spread_s is None else round(2 * spread_s * 1e3, 3)


def time_rows(cal: Calibration) -> list[list[str]]:
    """stage, method, predicted, two sigma, measured, error."""
    rows = [
        [
            c.label,
            c.method,
            show_ms(c.predicted),
            _show_two_sigma(s.spread_s),
            show_ms(c.measured),
            show_error(c),
        ]
        for s, c in zip(cal.estimate.timing.stages, cal.stage_times())
    ]
    untracked = cal.estimate.timing.untracked_s * 1e3
    measured = None
    if cal.measured is not None and cal.measured.ok:
        measured = (cal.measured.duration_s - sum(cal.measured.stage_durations.values())) * 1e3
    rows.append(
        ["(outside stages)", "measurement", show_ms(untracked), "-", show_ms(measured), "-"]
    )
    c = cal.request_time()
    rows.append(
        [
            "request",
            c.method,
            show_ms(c.predicted),
            _show_two_sigma(cal.estimate.timing.spread_s),
            show_ms(c.measured),
            show_error(c),
        ]
    )
    return rows


def _show_two_sigma(spread_s: float | None) -> str:
    return "-" if spread_s is None else f"±{show_seconds(2 * spread_s)}"
