"""What `dslc plan` prints: the --json document (version 1) and the tables; sizes in and out."""

from __future__ import annotations

import re
from collections.abc import Sequence

from calibration.plan.model import Component, PlacementKind, Plan

VERSION = 1
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*")


def parse_size(text: str, *, per_second: bool = False) -> int:
    """``80GiB``, ``1.5TB``, ``123456`` (bytes); with ``per_second``, ``25GB/s`` too."""
    body = text.strip()
    if per_second and body.lower().endswith("/s"):
        body = body[:-2]
    match = _SIZE.fullmatch(body)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS or len(match.group(1)) > 30:
        raise ValueError(
            f"{text!r} is not a size; write e.g. 80GiB, 24GB, 512MiB or a number of bytes"
        )
    whole, _, frac = match.group(1).partition(".")
    scale = _UNITS[unit]
    return (
        int(whole) * scale + (int(frac) * scale) // 10 ** len(frac) if frac else int(whole) * scale
    )


def show_bytes(value: int) -> str:
    """Binary units, three significant figures: 28.6 GiB."""
    sign, size = ("-", -value) if value < 0 else ("", value)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{sign}{size / scale:.3g} {unit}"
    return f"{sign}{size} B"


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
        "device": {
            "capacity_bytes": d.capacity_bytes,
            "reserve_bytes": d.reserve,
            "usable_bytes": d.usable_bytes,
            "pin_budget_bytes": d.pin_budget_bytes,
            "bandwidth_bytes_per_s": d.bandwidth_bytes_per_s,
        },
        "transfer_bytes": plan.transfer_bytes,
        "transfer_s": plan.transfer_s,
        "pinned_bytes": plan.pinned_bytes,
        "components": [
            {
                "name": p.component,
                "placement": p.kind.value,
                "layers": p.layers,
                "resident_layers": list(p.resident_layers),
                "resident_layer_names": [
                    names[p.component][i] for i in p.resident_layers if names.get(p.component)
                ],
                "device_bytes": p.device_bytes,
                "onload_bytes": p.onload_bytes,
                "pinned_bytes": p.pinned_bytes,
                "transfer_bytes": p.transfer_bytes,
                "transfer_s": p.transfer_s,
                "binding_phase": p.binding_phase,
                "missing_bytes": p.missing_bytes,
            }
            for p in plan.placements
        ],
        "phases": [
            {
                "target": u.target,
                "label": u.label,
                "bound_bytes": u.bound_bytes,
                "weights_bytes": u.weights_bytes,
                "headroom_bytes": u.headroom_bytes,
            }
            for u in plan.phases
        ],
    }


def component_rows(plan: Plan) -> list[list[str]]:
    """component, placement, on device, onloaded per phase, transfer per request, what binds."""
    return [
        [
            p.component,
            placement_text(p.kind, len(p.resident_layers), p.layers),
            show_bytes(p.device_bytes),
            show_bytes(p.onload_bytes),
            f"{p.transfer_s * 1000:.1f} ms",
            "-"
            if p.binding_phase is None
            else f"{p.binding_phase} (-{show_bytes(p.missing_bytes)})",
        ]
        for p in plan.placements
    ]


def phase_rows(plan: Plan) -> list[list[str]]:
    """target, phase, bound, weights on the device, headroom."""
    return [
        [
            u.target,
            u.label,
            show_bytes(u.bound_bytes),
            show_bytes(u.weights_bytes),
            show_bytes(u.headroom_bytes),
        ]
        for u in plan.phases
    ]
