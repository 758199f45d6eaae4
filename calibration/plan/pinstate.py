"""Pin state across placements: which host copies are pinned, and for whom (a shared-pin registry).

A worker's placement changes (a re-plan, a fallback, a request's own placement); its pinned host
copies follow as bookkeeping first: ``PinState.place`` says, for one owner's new placement, what
to pin now (wanted and pinned by no one), what to release now (dropped, and held by no other
owner: a component that leaves the host, a layer that stays resident now), and what stays pinned
though this owner dropped it (another worker or pipeline shares that host copy). Pure: no torch;
``calibration.placement.pins.SharedPins`` applies each change to the tensors on a CUDA device.
See docs/planning.md "Pin state across placements".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from attrs import field, frozen

from calibration.plan.model import Placement, PlacementKind, Plan

#: The part of a component that is not one of its repeated layers (embeddings, norms, heads).
REST = -1


@frozen(order=True)
class PinKey:
    """One pinnable host copy: a component's layer (by index), or the rest of it (``REST``)."""

    component: str
    part: int


def _owners(value: Mapping[PinKey, Iterable[str]]) -> Mapping[PinKey, frozenset[str]]:
    return MappingProxyType({k: frozenset(v) for k, v in value.items() if v})


def placement_pins(p: Placement) -> frozenset[PinKey]:
    """The host copies one placement keeps pinned: an offloaded or grouped one's every part when
    pinned, a streamed one's streamed layers (all when pinned, its frontier when pageable)."""
    if p.kind is PlacementKind.RESIDENT:
        return frozenset()
    if p.kind in (PlacementKind.OFFLOADED, PlacementKind.GROUPED):
        parts = (REST, *range(p.layers)) if p.pinned_bytes and not p.pageable else ()
    elif p.pageable:
        parts = p.pinned_layers
    else:
        parts = tuple(sorted(set(range(p.layers)) - set(p.resident_layers)))
    return frozenset(PinKey(p.component, part) for part in parts)


def plan_pins(plan: Plan) -> frozenset[PinKey]:
    """The host copies a plan keeps pinned (none for an infeasible plan)."""
    return frozenset(k for p in plan.placements for k in placement_pins(p))


@frozen
class PinChange:
    """One owner's move to a new placement: the state after, and what to do to the tensors."""

    state: PinState
    pin: frozenset[PinKey]  # wanted, pinned by no one before: pin now
    release: frozenset[PinKey]  # dropped, held by no one after: release now
    kept: frozenset[PinKey]  # dropped by this owner, still held by another: stays pinned
    shared: frozenset[PinKey]  # wanted, already pinned for another owner: nothing to do


@frozen
class PinState:
    """Each pinned host copy and the owners (workers, pipelines) that hold it."""

    holders: Mapping[PinKey, frozenset[str]] = field(factory=dict, converter=_owners, hash=False)

    @property
    def pinned(self) -> frozenset[PinKey]:
        """Every host copy pinned now."""
        return frozenset(self.holders)

    def of(self, owner: str) -> frozenset[PinKey]:
        """The host copies ``owner`` holds."""
        return frozenset(k for k, owners in self.holders.items() if owner in owners)

    def place(self, owner: str, wanted: Iterable[PinKey]) -> PinChange:
        """``owner``'s pins become ``wanted``: the new state and what changes on the tensors."""
        wanted, mine = frozenset(wanted), self.of(owner)
        holders = {k: set(v) for k, v in self.holders.items()}
        for key in mine - wanted:
            holders[key].discard(owner)
        for key in wanted:
            holders.setdefault(key, set()).add(owner)
        dropped = mine - wanted
        return PinChange(
            PinState(holders),
            pin=frozenset(k for k in wanted if k not in self.holders),
            release=frozenset(k for k in dropped if not holders[k]),
            kept=frozenset(k for k in dropped if holders[k]),
            shared=frozenset(k for k in wanted - mine if k in self.holders),
        )

    def apply_plan(self, owner: str, plan: Plan) -> PinChange:
        """``owner``'s pins become what ``plan`` keeps pinned (``plan_pins``)."""
        return self.place(owner, plan_pins(plan))

    def leave(self, owner: str) -> PinChange:
        """``owner`` holds nothing any more (its placement undone, the worker stopped)."""
        return self.place(owner, ())
