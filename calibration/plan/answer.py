"""The solver's answer for a chosen placement: each phase's weights and headroom (at a streamed
layer's arrival too), each component's placement and why it is not resident, the host copies and
the predicted time (``calibration.plan.solver`` picks; this module explains the pick).
"""

from __future__ import annotations

from collections.abc import Sequence

from calibration.plan.candidates import Candidate
from calibration.plan.frontier import pin_frontier, pinned_moved
from calibration.plan.model import (
    Component,
    Device,
    Phase,
    PhaseUse,
    Placement,
    PlacementKind,
    Plan,
    Target,
)
from calibration.plan.timing import predict, split_seconds


def _phase_weights(
    picked: Sequence[Candidate],
    phase: Phase,
    index: dict[str, int],
    always: int,
    components: Sequence[Component] = (),
) -> int:
    """Resident bytes + what the phase onloads: a component it needs whole, all its weights."""
    whole = set(phase.whole_components)
    onloads = sum(picked[index[n]].onload for n in set(phase.present) - whole)
    return (
        always
        + onloads
        + sum(components[index[n]].weight_bytes - picked[index[n]].always for n in whole)
    )


def _transition_headroom(
    picked: Sequence[Candidate], phase: Phase, index: dict[str, int], left: int
) -> int | None:
    """What is left at the moment a streamed layer arrives in the phase (``left``: its headroom
    beside the bound); None when no layer streams there or it has no transition figure."""
    moves = phase.transition_bytes
    streamed = set(phase.active_components) - set(phase.whole_components)
    if moves is None or not any(picked[index[n]].kind == PlacementKind.LAYERWISE for n in streamed):
        return None
    return left + phase.bound_bytes - max(moves, phase.bound_bytes)


def plan_of(
    components: Sequence[Component],
    picked: Sequence[Candidate],
    targets: Sequence[Target],
    index: dict[str, int],
    device: Device,
    nodes: int,
) -> Plan:
    """The plan of the picked candidates: each phase's headroom, each component's placement, why
    it is not resident (the phase that binds), and each target's predicted time."""
    usable = device.usable_bytes
    always = sum(c.always for c in picked)
    # each phase's weights once: per component below, O(1) a phase (not O(its active set))
    keyed = [((t.name, p.label, k), t, p) for t in targets for k, p in enumerate(t.phases)]
    weights_of = {key: _phase_weights(picked, p, index, always, components) for key, _, p in keyed}
    uses = [
        PhaseUse(
            t.name,
            p.label,
            p.bound_bytes,
            weights_of[key],
            usable - weights_of[key] - p.bound_bytes,
            _transition_headroom(picked, p, index, usable - weights_of[key] - p.bound_bytes),
        )
        for key, t, p in keyed
    ]
    wholes = {key: frozenset(p.whole_components) for key, _, p in keyed}
    actives = {key: frozenset(p.present) for key, _, p in keyed}
    placements = []
    pins = pin_frontier(components, picked, targets, device.pin_budget_bytes)
    for component, cand in zip(components, picked):
        binding, missing = None, 0
        if cand.kind != PlacementKind.RESIDENT:
            extra = component.weight_bytes - cand.always
            for key, t, p in keyed:
                if component.name in wholes[key]:
                    continue  # needed whole there: resident or not, the same bytes
                weights = weights_of[key] + extra
                weights -= cand.onload if component.name in actives[key] else 0
                short = weights + p.bound_bytes - usable
                if short > missing:
                    binding, missing = f"{t.name}/{p.label}", short
        pinned = pins.get(component.name, ())
        placements.append(_placement(component, cand, device, (binding, missing), pinned, targets))
    return Plan(
        True,
        "fits",
        tuple(placements),
        tuple(uses),
        sum(p.transfer_bytes for p in placements),
        sum(p.transfer_s for p in placements),
        device,
        sum(p.pinned_bytes for p in placements),
        nodes,
        times=predict(components, picked, targets, device, pins),
        host_bytes=sum(p.pinned_bytes + p.pageable_bytes for p in placements),
    )


def _placement(
    component: Component,
    cand: Candidate,
    device: Device,
    binds: tuple[str | None, int],
    pinned_layers: Sequence[int],
    targets: Sequence[Target],
) -> Placement:
    """One component's placement: where it lives, its host copy (a pageable one's frontier of
    pinned layers), what it moves and how long."""
    moved = cand.moved_bytes  # bytes per request, weighted over targets
    host = component.weight_bytes - cand.always if cand.kind != PlacementKind.RESIDENT else 0
    pinned = sum(component.layer_bytes[i] for i in pinned_layers)
    fast = pinned_moved(component, pinned_layers, targets)
    return Placement(
        component=component.name,
        kind=cand.kind,
        resident_layers=cand.resident_layers,
        layers=len(component.layer_bytes),
        device_bytes=cand.always,
        onload_bytes=cand.onload,
        pinned_bytes=pinned if cand.pageable else host,
        transfer_bytes=moved,
        transfer_s=split_seconds(moved, fast, cand.pageable, device)[0],
        binding_phase=binds[0],
        missing_bytes=binds[1],
        pageable_bytes=host - pinned if cand.pageable else 0,
        pageable=cand.pageable,
        pinned_layers=tuple(pinned_layers),
        group_bytes=component.group_bytes if cand.kind == PlacementKind.GROUPED else (),
    )
