"""What `dslc plan` prints: the --json document (version 1) and the tables; sizes in and out."""

from __future__ import annotations

from collections.abc import Sequence

from artifact.units import parse_size, show_bytes, show_seconds
from calibration.plan.frontier import ranges
from calibration.plan.model import Component, Placement, PlacementKind, Plan

VERSION = 1
__all__ = [
    "VERSION",
    "component_rows",
    "document",
    "parse_size",
    "phase_rows",
    "placement_text",
    "show_bytes",
    "time_lines",
]


def placement_text(kind: PlacementKind, kept: int, layers: int) -> str:
    """``resident``, ``offloaded``, ``layerwise 30/40``."""
    return f"{kind.value} {kept}/{layers}" if kind == PlacementKind.LAYERWISE else kind.value


def document(plan: Plan, components: Sequence[Component] = ()) -> dict[str, object]:
    """The --json document: the device, the totals, every component and every phase."""
    names = {c.name: c.layer_names for c in components}
    d = plan.device
    return {
        "version": VERSION,
        "feasible": plan.feasible,
        "reason": plan.reason,
        "proven": plan.proven,
        "stopped_by": plan.stopped_by,
        "lower_bound_bytes": plan.lower_bound_bytes,
        "device": {
            "capacity_bytes": d.capacity_bytes,
            "reserve_bytes": d.reserve,
            "usable_bytes": d.usable_bytes,
            "pin_budget_bytes": d.pin_budget_bytes,
            "bandwidth_bytes_per_s": d.bandwidth_bytes_per_s,
            "pageable_factor": d.pageable_factor,
            "host_memory_bytes": d.host_memory_bytes,
        },
        "predicted_s": plan.predicted_seconds,
        "times": _times(plan),
        "transfer_bytes": plan.transfer_bytes,
        "transfer_s": plan.transfer_s,
        "pinned_bytes": plan.pinned_bytes,
        "host_bytes": plan.host_bytes,
        "shortfall": None if plan.shortfall is None else plan.shortfall.value,
        "components": [_component(p, names.get(p.component, ())) for p in plan.placements],
        "phases": [
            {
                "target": u.target,
                "label": u.label,
                "bound_bytes": u.bound_bytes,
                "weights_bytes": u.weights_bytes,
                "headroom_bytes": u.headroom_bytes,
                "transition_headroom_bytes": u.transition_headroom_bytes,
            }
            for u in plan.phases
        ],
    }


def _component(p: Placement, layer_names: Sequence[str]) -> dict[str, object]:
    """One component's placement as the document writes it."""
    return {
        "name": p.component,
        "placement": p.kind.value,
        "layers": p.layers,
        "resident_layers": list(p.resident_layers),
        "resident_layer_names": [layer_names[i] for i in p.resident_layers if layer_names],
        "device_bytes": p.device_bytes,
        "onload_bytes": p.onload_bytes,
        "pinned_bytes": p.pinned_bytes,
        "pageable_bytes": p.pageable_bytes,
        "pinned_layers": list(p.pinned_layers),
        "transfer_bytes": p.transfer_bytes,
        "transfer_s": p.transfer_s,
        "binding_phase": p.binding_phase,
        "missing_bytes": p.missing_bytes,
        "group_bytes": list(p.group_bytes),
    }


def _times(plan: Plan) -> list[dict[str, object]]:
    """Each target's predicted request time and its parts."""
    return [
        {
            "target": t.target,
            "weight": t.weight,
            "predicted_s": t.seconds,
            "compute_s": t.compute_s,
            "transfer_s": t.transfer_s,
            "hidden_s": t.hidden_s,
            "exposed_s": t.exposed_s,
            "pageable_s": t.pageable_s,
            "measured_extra_s": t.measured_extra_s,
            "stages_s": dict(t.stage_seconds),
        }
        for t in plan.times
    ]


def time_lines(plan: Plan) -> list[list[str]]:
    """Per target: the predicted request time, then its parts: the calibration's compute, the
    transfer that no overlap hides (and how much of it comes from pageable memory)."""
    lines = []
    for t in plan.times:
        compute = (
            "unknown (no time calibrated)" if t.compute_s is None else show_seconds(t.compute_s)
        )
        total = "unknown" if t.seconds is None else show_seconds(t.seconds)
        parts = [f"{t.target}: {total}", f"compute {compute}"]
        hidden = "none hidden" if not t.hidden_s else f"{show_seconds(t.hidden_s)} hidden"
        parts.append(f"transfer {show_seconds(t.exposed_s)} ({hidden})")
        if t.pageable_s:
            parts.append(f"{show_seconds(t.pageable_s)} of it from pageable memory")
        lines.append(parts)
    return lines


def component_rows(plan: Plan) -> list[list[str]]:
    """component, placement, on device, onloaded per phase, transfer per request, what binds."""
    return [
        [
            p.component,
            placement_text(p.kind, len(p.resident_layers), p.layers)
            + (" pageable" if p.pageable else "")
            + (f" (layers {ranges(p.pinned_layers)} pinned)" if p.pinned_layers else ""),
            show_bytes(p.device_bytes),
            show_bytes(p.onload_bytes),
            show_seconds(p.transfer_s),
            "-"
            if p.binding_phase is None
            else f"{p.binding_phase} (missing {show_bytes(p.missing_bytes)})",
        ]
        for p in plan.placements
    ]


def phase_rows(plan: Plan) -> list[list[str]]:
    """target, phase, activation bound (weights excluded), weights on the device, headroom (and
    at a streamed layer's arrival, when the phase has a transition figure)."""
    return [
        [
            u.target,
            u.label,
            show_bytes(u.bound_bytes),
            show_bytes(u.weights_bytes),
            show_bytes(u.headroom_bytes)
            + (
                ""
                if u.transition_headroom_bytes is None
                else f" ({show_bytes(u.transition_headroom_bytes)} as a layer arrives)"
            ),
        ]
        for u in plan.phases
    ]
