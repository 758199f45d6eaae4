"""The lifecycle report as `dslc plan --validate` shows it: lines on a terminal, one JSON document.

Pure (no torch): reads the ``Outcome``'s report and records (docs/planning.md lists the keys).
"""

from __future__ import annotations

from collections.abc import Sequence

from artifact.units import show_bytes
from calibration.lifecycle.model import Report, StepName, time_allowance
from runtime.record import WarmupRecord

VERSION = 1


def document(report: Report, records: Sequence[WarmupRecord] = ()) -> dict[str, object]:
    """The --json document: the verdict, the placement in force, every step, every record."""
    return {
        "version": VERSION,
        "mode": report.mode.value,
        "validated": report.validated,
        "serving": report.serving,
        "status": report.status,
        "verdict": report.verdict,
        "placement": dict(report.placement),
        "left_in_place": dict(report.left_in_place),
        "steps": [
            {"name": s.name, "outcome": s.outcome, "detail": s.detail, **dict(s.data)}
            for s in report.steps
        ],
        "records": [r.to_json() for r in records],
    }


def lines(report: Report, header: str = "") -> list[str]:
    """One line per step (name, outcome, why), the phases of each validation, the verdict."""
    out = [header] if header else []
    width = max((len(s.name) for s in report.steps), default=0)
    for step in report.steps:
        out.append(f"{step.name:<{width}}  {step.outcome:<13}  {step.detail}")
        if step.name == StepName.VALIDATE:
            out.extend(_phase_lines(step.data.get("phases")))
            out.extend(_time_lines(step.data.get("time")))
    head = "holds" if report.status == 0 else f"DOES NOT HOLD (exit {report.status})"
    out.append(f"verdict: {head}: {report.verdict}")
    return out


def _phase_lines(phases: object) -> list[str]:
    """Each validated phase: measured against predicted, marked when over."""
    if not isinstance(phases, list):
        return []
    out = []
    for p in phases:
        measured = p.get("measured_bytes")
        if measured is None:
            continue
        predicted, usable = p["predicted_bytes"], p["usable_bytes"]
        mark = " OVER the bound" if measured > predicted else ""
        mark += f" OVER the usable {show_bytes(usable)}" if measured > usable else ""
        out.append(
            f"    {p['label']}: measured {show_bytes(measured)} of {show_bytes(predicted)} "
            f"predicted{mark}"
        )
    return out


def _seconds(value: object) -> str:
    return "unknown" if not isinstance(value, int | float) else f"{value:.3g} s"


def _time_lines(time: object) -> list[str]:
    """The request's time: measured beside predicted, the spread, the time before the plan."""
    if not isinstance(time, dict):
        return []
    measured, predicted = time["measured_s"], time["predicted_s"]
    over = isinstance(predicted, float) and measured > predicted + time_allowance(
        predicted, time["spread_s"]
    )
    return [
        f"    time: measured {_seconds(measured)} of {_seconds(predicted)} predicted "
        f"(spread {_seconds(time['spread_s'])}; before the plan {_seconds(time['previous_s'])})"
        + (" SLOWER than predicted" if over else "")
    ]
