"""The request's predicted time under a plan: the calibration's compute, plus the host-to-device
transfer the plan adds that no overlap hides (docs/planning.md "Speed").

The overlap modelled is none: ``calibration.plan.apply`` onloads an offloaded component with
accelerate's hook and a streamed layer with diffusers' group offloading without a prefetch stream
(``use_stream=False``), both copies made before the module runs on the compute stream, so every
byte moved adds its copy time. A pageable copy costs ``Device.pageable_factor`` times a pinned one.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from calibration.plan.candidates import Candidate, layer_uses, whole_uses
from calibration.plan.model import Component, Device, PlacementKind, Target, TimePrediction


def target_transfer_bytes(component: Component, cand: Candidate, target: Target) -> int:
    """The bytes one request at ``target`` moves for this component under this candidate."""
    once = (attrs.evolve(target, weight=1),)
    if cand.kind == PlacementKind.RESIDENT:
        return 0
    if cand.kind == PlacementKind.OFFLOADED:
        return component.weight_bytes * whole_uses(component, once)
    calls = layer_uses(component, once)
    return sum(component.layer_bytes[i] * calls[i] for i in cand.order[cand.kept :])


def copy_seconds(nbytes: int, pageable: bool, device: Device) -> float:
    """How long the link takes to copy ``nbytes`` host-to-device, from pinned or pageable memory."""
    per_byte = 1.0 / device.bandwidth_bytes_per_s
    return nbytes * per_byte * (float(device.pageable_factor) if pageable else 1.0)


def predict(
    components: Sequence[Component],
    picked: Sequence[Candidate],
    targets: Sequence[Target],
    device: Device,
) -> tuple[TimePrediction, ...]:
    """Each target's predicted request time under the picked candidates (no overlap: above)."""
    out = []
    for t in targets:
        transfer = pageable = 0.0
        for component, cand in zip(components, picked):
            seconds = copy_seconds(target_transfer_bytes(component, cand, t), cand.pageable, device)
            transfer += seconds
            pageable += seconds if cand.pageable else 0.0
        out.append(
            TimePrediction(t.name, t.weight, t.compute_s, transfer, 0.0, pageable, t.stage_seconds)
        )
    return tuple(out)
