"""The request's predicted time under a plan: the calibration's compute, plus the host-to-device
transfer the plan adds that no overlap hides (docs/planning.md "Speed").

The overlap modelled is none: ``calibration.plan.apply`` onloads an offloaded component with
accelerate's hook and a streamed layer with diffusers' group offloading without a prefetch stream
(``use_stream=False``), both copies made before the module runs on the compute stream, so every
byte moved adds its copy time. A pageable copy costs ``Device.pageable_factor`` times a pinned one;
a pageable component's layers pinned by the pin budget's frontier (``calibration.plan.frontier``)
are copied at the pinned rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import attrs

from calibration.plan.candidates import Candidate, grouped_moved, layer_uses, whole_uses
from calibration.plan.frontier import pinned_moved
from calibration.plan.model import Component, Device, PlacementKind, Target, TimePrediction


def target_transfer_bytes(component: Component, cand: Candidate, target: Target) -> int:
    """The bytes one request at ``target`` moves for this component under this candidate."""
    once = (attrs.evolve(target, weight=1),)
    if cand.kind == PlacementKind.RESIDENT:
        return 0
    if cand.kind == PlacementKind.OFFLOADED:
        return component.weight_bytes * whole_uses(component, once)
    if cand.kind == PlacementKind.GROUPED:
        return grouped_moved(component, once)
    calls = layer_uses(component, once)
    return sum(component.layer_bytes[i] * calls[i] for i in cand.order[cand.kept :])


def copy_seconds(nbytes: int, pageable: bool, device: Device) -> float:
    """How long the link takes to copy ``nbytes`` host-to-device, from pinned or pageable memory."""
    per_byte = 1.0 / device.bandwidth_bytes_per_s
    return nbytes * per_byte * (float(device.pageable_factor) if pageable else 1.0)


def split_seconds(moved: int, pinned: int, pageable: bool, device: Device) -> tuple[float, float]:
    """The copy time of ``moved`` bytes of which ``pinned`` come from pinned layers (a pageable
    component's frontier), and the part of it copied from pageable memory."""
    if not pageable:
        return copy_seconds(moved, False, device), 0.0
    slow = copy_seconds(moved - pinned, True, device)
    return copy_seconds(pinned, False, device) + slow, slow


def predict(
    components: Sequence[Component],
    picked: Sequence[Candidate],
    targets: Sequence[Target],
    device: Device,
    pins: Mapping[str, Sequence[int]] = MappingProxyType({}),
) -> tuple[TimePrediction, ...]:
    """Each target's predicted request time under the picked candidates (no overlap: above), a
    pageable component's pinned layers (``pins``) at the pinned rate."""
    out = []
    for t in targets:
        transfer = pageable = 0.0
        once = (attrs.evolve(t, weight=1),)
        for component, cand in zip(components, picked):
            pinned = pinned_moved(component, pins.get(component.name, ()), once)
            moved = target_transfer_bytes(component, cand, t)
            seconds, slow = split_seconds(moved, pinned, cand.pageable, device)
            transfer += seconds
            pageable += slow
        out.append(
            TimePrediction(t.name, t.weight, t.compute_s, transfer, 0.0, pageable, t.stage_seconds)
        )
    return tuple(out)
