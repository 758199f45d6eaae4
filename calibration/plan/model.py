"""Residency planning: which components stay on the device, which are offloaded, how many layers.

Pure (no torch): the inputs are frozen values built from a calibration (``calibration.plan.inputs``)
or by hand; ``solve`` returns a ``Plan`` that says, per component, where it lives, why, and what it
costs in host-to-device transfer per request. See docs/planning.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from types import MappingProxyType

from attrs import field, frozen, validators

from artifact.units import show_bytes
from calibration.errors import CalibrationError
from calibration.plan.memory import allocator_margin

DEFAULT_BANDWIDTH = 25 * 10**9  # bytes/s: a PCIe 4.0 x16 link's pinned host-to-device copy rate
#: How many times slower a host-to-device copy from pageable memory is than from pinned memory,
#: per byte: ``bench/copies.py`` measures it on a CUDA device (bench/README.md "Pinned and
#: pageable copies"); give the measured value as ``Device.pageable_factor`` (``--pageable-factor``).
DEFAULT_PAGEABLE_FACTOR = 2.0


class PlacementKind(str, Enum):
    """Where a component lives; the value is how plans and documents spell it."""

    RESIDENT = "resident"  # on the device for the whole request
    OFFLOADED = "offloaded"  # on the host, onloaded whole for the phases that use it
    LAYERWISE = "layerwise"  # on the device but for the repeated layers streamed one by one
    # on the host, onloaded group by group (diffusers' block-level group offloading) for each call
    GROUPED = "grouped"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Shortfall(str, Enum):
    """What an infeasible plan runs short of; the value is how documents spell it."""

    DEVICE = "device"  # a phase's steady state (whole weights included) on the device
    HOST = "host"  # host memory for the host copies the device needs
    TRANSITION = "transition"  # the device at the moment a streamed layer arrives

    def __str__(self) -> str:
        return self.value


class PlanInputError(CalibrationError, ValueError):
    """Inputs that cannot describe a planning problem (unknown component, negative bytes, ...)."""


class PlanLimitError(PlanInputError):
    """Inputs past a count limit, or whose search spent its budget before anything fitted."""


def _non_negative(_instance: object, attribute: object, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise PlanInputError(
            f"{getattr(attribute, 'name', '?')} must be an int >= 0, got {value!r}"
        )


def _optional_non_negative(_instance: object, attribute: object, value: int | None) -> None:
    if value is not None:
        _non_negative(None, attribute, value)


def _int_tuple(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


def _name_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _all_non_negative(_instance: object, attribute: object, value: tuple[int, ...]) -> None:
    for item in value:
        _non_negative(None, attribute, item)


@frozen
class Component:
    """A pipeline component's weights: all of them, and its repeated layers (streamable one by one).

    ``layer_bytes[i]`` is layer i's weights, in the module's own order; the rest of
    ``weight_bytes`` (embeddings, norms, heads) stays on the device while any layer does.
    ``group_bytes`` are the block groups diffusers' group offloading forms on the module
    (``calibration.placement.groups.block_groups``): grouped, one of them is on the device at a
    time beside the rest (its groups outside the blocks, on for the whole call).
    """

    name: str
    weight_bytes: int = field(validator=_non_negative)
    layer_bytes: tuple[int, ...] = field(default=(), converter=_int_tuple)
    layer_names: tuple[str, ...] = field(default=(), converter=_name_tuple)  # optional
    group_bytes: tuple[int, ...] = field(default=(), converter=_int_tuple)

    def __attrs_post_init__(self) -> None:
        _all_non_negative(None, "layer_bytes", self.layer_bytes)
        if self.layer_names and len(self.layer_names) != len(self.layer_bytes):
            raise PlanInputError(
                f"component {self.name!r}: {len(self.layer_names)} layer names for "
                f"{len(self.layer_bytes)} layers"
            )
        _all_non_negative(None, "group_bytes", self.group_bytes)
        for what, parts in (("layers", self.layer_bytes), ("block groups", self.group_bytes)):
            if sum(parts) > self.weight_bytes:
                raise PlanInputError(
                    f"component {self.name!r}: its {what} ({show_bytes(sum(parts))}) weigh "
                    f"more than the whole component ({show_bytes(self.weight_bytes)})"
                )

    @property
    def grouped_onload_bytes(self) -> int:
        """On the device while it runs grouped: the largest block group and what is outside them."""
        return self.weight_bytes - sum(self.group_bytes) + max(self.group_bytes, default=0)

    @classmethod
    def uniform(cls, name: str, weight_bytes: int, layers: int, bytes_per_layer: int) -> Component:
        """A component of ``layers`` equal layers (a transformer's blocks)."""
        return cls(name, weight_bytes, (bytes_per_layer,) * layers)


@frozen
class Phase:
    """A part of a request that must fit: its peak beyond the weights, and who is on the device.

    ``bound_bytes`` is the phase's peak *excluding* every component's weights (activations,
    workspaces); ``active_components`` must be on the device while it runs. ``prefetched`` are
    being onloaded meanwhile for a later phase (present, not running): each component present is
    charged once, active, prefetched or both (docs/planning.md "Prefetch").
    """

    label: str
    bound_bytes: int = field(validator=_non_negative)
    active_components: tuple[str, ...] = field(default=(), converter=_name_tuple)
    # components this phase needs whole on the device at once (a weight refresh: a LoRA load or
    # fuse): streaming serves them not; each is active here too (added when not listed)
    whole_components: tuple[str, ...] = field(default=(), converter=_name_tuple)
    # beyond the weights, what is live at the moment a streamed layer arrives here when that is
    # more than the bound (None: the bound covers it); docs/planning.md "Transitions"
    transition_bytes: int | None = field(default=None, validator=_optional_non_negative)
    # components onloading during the phase for a later one (present, not running)
    prefetched: tuple[str, ...] = field(default=(), converter=_name_tuple)

    def __attrs_post_init__(self) -> None:
        missing = tuple(n for n in self.whole_components if n not in self.active_components)
        if missing:  # frozen: the one place a phase's active set is completed
            object.__setattr__(self, "active_components", self.active_components + missing)

    @property
    def present(self) -> tuple[str, ...]:
        """The components on the device in this phase, each once: the active, then the incoming."""
        return tuple(dict.fromkeys(self.active_components + self.prefetched))


def _phase_tuple(value: Iterable[Phase]) -> tuple[Phase, ...]:
    return tuple(value)


def _frozen_counts(value: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(value))


def _seconds_or_none(_instance: object, attribute: object, value: float | None) -> None:
    if value is not None and (
        not isinstance(value, int | float) or not math.isfinite(value) or value < 0
    ):
        raise PlanInputError(
            f"{getattr(attribute, 'name', '?')} must be a finite number of seconds >= 0, "
            f"got {value!r}"
        )


def _frozen_seconds(value: Mapping[str, float]) -> Mapping[str, float]:
    for name, seconds in value.items():
        _seconds_or_none(None, f"stage_seconds[{name!r}]", seconds)
    return MappingProxyType({k: float(v) for k, v in value.items()})


def _frozen_layer_counts(value: Mapping[str, Iterable[int]]) -> Mapping[str, tuple[int, ...]]:
    return MappingProxyType({k: tuple(v) for k, v in value.items()})


@frozen
class Target:
    """One serving shape: its phases, and how often each component and layer runs per request.

    ``uses[c]``: how many times component c is onloaded per request when offloaded whole (once per
    stretch of phases that use it: 1 for most). ``layer_uses[c][i]``: calls of layer i per request.
    ``weight`` counts this shape in the objective (the sum over targets of weight x transfer).
    """

    name: str
    phases: tuple[Phase, ...] = field(converter=_phase_tuple)
    uses: Mapping[str, int] = field(factory=dict, converter=_frozen_counts, hash=False)
    layer_uses: Mapping[str, tuple[int, ...]] = field(
        factory=dict, converter=_frozen_layer_counts, hash=False
    )
    weight: int = field(default=1, validator=_non_negative)
    # the calibration's predicted compute of one request at this shape (None: not calibrated),
    # and of each stage (its parts); measured with the weights the calibration kept on the device
    compute_s: float | None = field(default=None, validator=_seconds_or_none)
    stage_seconds: Mapping[str, float] = field(factory=dict, converter=_frozen_seconds, hash=False)


def _factor(_instance: object, attribute: object, value: float) -> None:
    if not isinstance(value, int | float) or not math.isfinite(value) or not 1 <= value <= 1000:
        raise PlanInputError(f"pageable_factor must be a number in [1, 1000], got {value!r}")


@frozen
class Device:
    """The device to plan for: capacity, the reserve kept free, the host pin budget, the link."""

    capacity_bytes: int = field(validator=_non_negative)
    reserve_bytes: int | None = None  # None: allocator_margin(capacity)
    pin_budget_bytes: int | None = None  # None: unlimited pinned host memory
    bandwidth_bytes_per_s: float = field(
        default=float(DEFAULT_BANDWIDTH), validator=validators.gt(0)
    )
    # a pageable copy's time per byte over a pinned one's (>= 1; a measured value: above)
    pageable_factor: float = field(default=DEFAULT_PAGEABLE_FACTOR, validator=_factor)
    # the host memory the host copies (pinned and pageable) may fill; None: unlimited
    host_memory_bytes: int | None = field(default=None, validator=_optional_non_negative)

    @property
    def pins_allowed(self) -> int | None:
        """The pin budget in force: within host memory (pins are host memory too)."""
        budgets = [b for b in (self.pin_budget_bytes, self.host_memory_bytes) if b is not None]
        return min(budgets) if budgets else None

    @property
    def reserve(self) -> int:
        """The reserve in force."""
        if self.reserve_bytes is None:
            return allocator_margin(self.capacity_bytes)
        return self.reserve_bytes

    @property
    def usable_bytes(self) -> int:
        """What the plan may fill: capacity minus the reserve (may be negative: nothing fits)."""
        return self.capacity_bytes - self.reserve


def most_cautious_device(devices: Sequence[Device]) -> Device:
    """Ranks agree on the smallest usable device, the smallest pin budget and host, the slowest
    link."""
    if not devices:
        raise PlanInputError("no device reports to agree on")
    smallest = min(devices, key=lambda d: d.usable_bytes)
    pins = [d.pin_budget_bytes for d in devices if d.pin_budget_bytes is not None]
    hosts = [d.host_memory_bytes for d in devices if d.host_memory_bytes is not None]
    return Device(
        capacity_bytes=smallest.capacity_bytes,
        reserve_bytes=smallest.reserve,
        pin_budget_bytes=min(pins) if pins else None,
        bandwidth_bytes_per_s=min(d.bandwidth_bytes_per_s for d in devices),
        pageable_factor=max(d.pageable_factor for d in devices),
        host_memory_bytes=min(hosts) if hosts else None,
    )


def most_cautious_targets(reports: Sequence[Sequence[Target]]) -> tuple[Target, ...]:
    """Ranks agree per target and phase on the largest bound and the most uses (by name/label)."""
    if not reports:
        raise PlanInputError("no rank reports to agree on")
    merged: dict[str, Target] = {}
    for report in reports:
        for target in report:
            merged[target.name] = (
                _merge_targets(merged[target.name], target) if target.name in merged else target
            )
    return tuple(merged.values())


def _merge_targets(a: Target, b: Target) -> Target:
    phases = {p.label: p for p in a.phases}
    for p in b.phases:
        if p.label in phases:
            q = phases[p.label]
            active = tuple(dict.fromkeys(q.active_components + p.active_components))
            whole = tuple(dict.fromkeys(q.whole_components + p.whole_components))
            moves = [b for b in (p.transition_bytes, q.transition_bytes) if b is not None]
            bound = max(p.bound_bytes, q.bound_bytes)
            incoming = tuple(dict.fromkeys(q.prefetched + p.prefetched))
            phases[p.label] = Phase(
                p.label, bound, active, whole, max(moves) if moves else None, incoming
            )
        else:
            phases[p.label] = p
    uses = dict(a.uses)
    for name, n in b.uses.items():
        uses[name] = max(n, uses.get(name, 0))
    layer_uses = dict(a.layer_uses)
    for name, calls in b.layer_uses.items():
        mine = layer_uses.get(name, ())
        width = max(len(mine), len(calls))
        padded = [mine + (0,) * (width - len(mine)), calls + (0,) * (width - len(calls))]
        layer_uses[name] = tuple(max(x, y) for x, y in zip(*padded))
    return Target(
        a.name,
        tuple(phases.values()),
        uses,
        layer_uses,
        max(a.weight, b.weight),
        _slowest(a.compute_s, b.compute_s),
        {
            stage: max(a.stage_seconds.get(stage, 0.0), b.stage_seconds.get(stage, 0.0))
            for stage in {**a.stage_seconds, **b.stage_seconds}
        },
    )


def _slowest(a: float | None, b: float | None) -> float | None:
    """Ranks agree on the slowest compute; unknown on any rank is unknown."""
    return None if a is None or b is None else max(a, b)


@frozen
class Placement:
    """Where one component lives, why, and what it costs per request."""

    component: str
    kind: PlacementKind
    resident_layers: tuple[int, ...]  # layer indices kept on the device (layerwise only)
    layers: int  # N: the component's repeated layers
    device_bytes: int  # always on the device (weights kept resident)
    onload_bytes: int  # added in the phases that use it: the whole weights, or the stream buffer
    pinned_bytes: int  # host copy that is streamed or onloaded from pinned memory
    transfer_bytes: int  # bytes moved per request, summed over targets by weight
    transfer_s: float
    binding_phase: str | None  # the phase that would overflow first were it fully resident
    missing_bytes: int  # ... by how much (0 when resident)
    pageable_bytes: int = 0  # host copy kept in pageable memory (over the pin budget)
    pageable: bool = False  # its copies come from pageable memory (``Device.pageable_factor``)
    # pageable, yet these streamed layers pinned (the pin budget's frontier: ``plan.frontier``)
    pinned_layers: tuple[int, ...] = field(default=(), converter=_int_tuple)
    # grouped: the block groups' bytes it was planned with (``Component.group_bytes``)
    group_bytes: tuple[int, ...] = field(default=(), converter=_int_tuple)


@frozen
class PhaseUse:
    """One phase under the plan: what it holds and the headroom left (negative: overflow)."""

    target: str
    label: str
    bound_bytes: int
    weights_bytes: int  # resident weights + what is onloaded for this phase
    headroom_bytes: int
    # when a layer streams here and the phase has a transition figure: what is left at the
    # moment a layer arrives (negative: overflow); None otherwise
    transition_headroom_bytes: int | None = None


@frozen
class TimePrediction:
    """One target's predicted request time under a plan: the calibration's compute, plus the
    host-to-device transfer the plan adds that no overlap hides (docs/planning.md "Speed")."""

    target: str
    weight: int  # the target's weight in the plan's sums
    compute_s: float | None  # the calibration's compute per request (None: not calibrated)
    transfer_s: float  # every copy the plan makes in one request, pinned and pageable
    hidden_s: float  # the part of ``transfer_s`` that overlaps compute
    pageable_s: float = 0.0  # the part of ``transfer_s`` copied from pageable host memory
    # the compute's parts: each stage's, as the calibration predicts it
    stage_seconds: Mapping[str, float] = field(factory=dict, converter=_frozen_seconds, hash=False)
    # what this placement was measured slower than predicted (``calibration.plan.costs``)
    measured_extra_s: float = field(default=0.0, validator=_seconds_or_none)

    @property
    def exposed_s(self) -> float:
        """The transfer that adds to the request's time."""
        return self.transfer_s - self.hidden_s

    @property
    def seconds(self) -> float | None:
        """The predicted request time (None when the calibration has no compute time): the
        compute, the exposed transfer, and the placement's measured extra cost."""
        if self.compute_s is None:
            return None
        return self.compute_s + self.exposed_s + self.measured_extra_s


@frozen
class Plan:
    """The solver's answer: feasible with placements, or infeasible with a reason."""

    feasible: bool
    reason: str
    placements: tuple[Placement, ...]
    phases: tuple[PhaseUse, ...]
    transfer_bytes: int
    transfer_s: float
    device: Device
    pinned_bytes: int = 0
    nodes: int = 0  # search nodes visited (how hard the instance was)
    # False: the search stopped at a limit (``stopped_by``) before it proved this plan the least
    # transfer; it fits all the same. ``lower_bound_bytes``: the least transfer any plan could
    # have, in pinned bytes (a pageable byte counts ``Device.pageable_factor``; = the plan's own
    # when proven, ``transfer_bytes`` when nothing is pageable; None when not searched)
    proven: bool = True
    stopped_by: str | None = None
    lower_bound_bytes: int | None = None
    times: tuple[TimePrediction, ...] = ()  # per target, in the targets' order
    host_bytes: int = 0  # host copies, pinned and pageable (within ``Device.host_memory_bytes``)
    shortfall: Shortfall | None = None  # infeasible: what it runs short of (None: feasible)

    @property
    def predicted_seconds(self) -> float | None:
        """The predicted request time, summed over targets by weight like the transfer (one
        target: that request's); None when a target has no compute time or nothing fits."""
        if not self.times or any(t.seconds is None for t in self.times):
            return None
        return sum(t.weight * (t.seconds or 0.0) for t in self.times)

    def predicted(self, target: str) -> TimePrediction:
        """One target's predicted time by name."""
        for t in self.times:
            if t.target == target:
                return t
        raise KeyError(target)

    def placement(self, component: str) -> Placement:
        """One component's placement by name."""
        for p in self.placements:
            if p.component == component:
                return p
        raise KeyError(component)


__all__ = [
    "DEFAULT_BANDWIDTH",
    "DEFAULT_PAGEABLE_FACTOR",
    "Component",
    "Device",
    "Phase",
    "PhaseUse",
    "Placement",
    "PlacementKind",
    "Plan",
    "PlanInputError",
    "PlanLimitError",
    "Shortfall",
    "Target",
    "TimePrediction",
    "most_cautious_device",
    "most_cautious_targets",
]
