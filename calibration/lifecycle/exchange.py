"""A rank's planning inputs as JSON text and back, so ranks can send them to each other (``agree``).

Pure (no torch). Reading is strict: every value is checked by the planner's own value types
(``Component``, ``Phase``, ``Target``, ``Device`` validate themselves); anything else is a
``ValueError`` naming what could not be read. Never ``eval`` nor pickle: a rank's text is data.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from calibration.plan.model import Component, Device, Phase, Target

#: What one rank plans from: its components, its targets (its own bounds), its device.
Inputs = tuple[tuple[Component, ...], tuple[Target, ...], Device]


def dumps(components: Sequence[Component], targets: Sequence[Target], device: Device) -> str:
    """The inputs as one line of ASCII JSON."""
    return json.dumps(
        {
            "components": [
                [
                    c.name,
                    c.weight_bytes,
                    list(c.layer_bytes),
                    list(c.layer_names),
                    list(c.group_bytes),
                ]
                for c in components
            ],
            "targets": [_target(t) for t in targets],
            "device": [
                device.capacity_bytes,
                device.reserve_bytes,
                device.pin_budget_bytes,
                device.bandwidth_bytes_per_s,
                device.pageable_factor,
                device.host_memory_bytes,
            ],
        },
        sort_keys=True,
    )


def _target(t: Target) -> dict[str, object]:
    return {
        "name": t.name,
        "phases": [
            [
                p.label,
                p.bound_bytes,
                list(p.active_components),
                list(p.prefetched),
                list(p.whole_components),
                p.transition_bytes,
            ]
            for p in t.phases
        ],
        "uses": dict(t.uses),
        "layer_uses": {k: list(v) for k, v in t.layer_uses.items()},
        "weight": t.weight,
        "compute_s": t.compute_s,
        "stage_seconds": dict(t.stage_seconds),
    }


def _list(value: object, what: str) -> list[object]:
    if not isinstance(value, list):
        raise TypeError(f"{what} is not a list")
    return value


def _map(value: object, what: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise TypeError(f"{what} is not an object")
    return value


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} is not an integer")
    return value


def _ints(value: object, what: str) -> tuple[int, ...]:
    return tuple(_int(v, what) for v in _list(value, what))


def _strs(value: object, what: str) -> tuple[str, ...]:
    return tuple(str(v) for v in _list(value, what))


def _number(value: object, what: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"{what} is not a number")
    return float(value)


def _optional_int(value: object, what: str) -> int | None:
    return None if value is None else _int(value, what)


def loads(text: str) -> Inputs:
    """The inputs back from ``dumps``'s text; ``TypeError``, ``ValueError`` or ``KeyError`` when
    it is not such text."""
    doc = _map(json.loads(text), "the inputs")
    components = []
    for item in _list(doc["components"], "components"):
        name, weight, layers, names, groups = _list(item, "a component")
        components.append(
            Component(
                str(name),
                _int(weight, "weights"),
                _ints(layers, "layers"),
                _strs(names, "names"),
                _ints(groups, "groups"),
            )
        )
    targets = tuple(_read_target(_map(t, "a target")) for t in _list(doc["targets"], "targets"))
    capacity, reserve, pin, bandwidth, factor, host = _list(doc["device"], "the device")
    device = Device(
        _int(capacity, "the capacity"),
        _optional_int(reserve, "the reserve"),
        _optional_int(pin, "the pin budget"),
        _number(bandwidth, "the bandwidth"),
        _number(factor, "the pageable factor"),
        host_memory_bytes=_optional_int(host, "the host memory"),
    )
    return tuple(components), targets, device


def _read_target(t: dict[str, object]) -> Target:
    phases = []
    for item in _list(t["phases"], "phases"):
        label, bound, active, incoming, whole, moves = _list(item, "a phase")
        phases.append(
            Phase(
                str(label),
                _int(bound, "a bound"),
                _strs(active, "active components"),
                whole_components=_strs(whole, "whole components"),
                transition_bytes=_optional_int(moves, "the transition bytes"),
                prefetched=_strs(incoming, "prefetched components"),
            )
        )
    compute = t["compute_s"]
    return Target(
        str(t["name"]),
        tuple(phases),
        {str(k): _int(v, "uses") for k, v in _map(t["uses"], "uses").items()},
        {str(k): _ints(v, "layer uses") for k, v in _map(t["layer_uses"], "layer uses").items()},
        _int(t["weight"], "a weight"),
        None if compute is None else _number(compute, "compute"),
        {str(k): _number(v, "seconds") for k, v in _map(t["stage_seconds"], "stages").items()},
    )
