"""Pins per range of layers: the pin budget a plan leaves unpinned goes to the streamed layers of
its pageable components, the most used first (a frontier from the most used layers down).

The search places each host copy pinned or pageable whole; a streamed component larger than what
the budget has left is pageable, yet the budget left still fits some of its layers. A byte pinned
saves ``(pageable_factor - 1)`` copy times per call of its layer, so pinning by calls (most used
first) spends the budget where it saves the most; with layers of equal size (a transformer's
blocks) no other choice of layers saves more. Pure: no torch. See docs/planning.md "Pins".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from calibration.plan.candidates import Candidate, layer_uses
from calibration.plan.model import Component, PlacementKind, Target


def pin_frontier(
    components: Sequence[Component],
    picked: Sequence[Candidate],
    targets: Sequence[Target],
    budget: int | None,
) -> dict[str, tuple[int, ...]]:
    """Each pageable streamed component's layers to pin (ascending indices): the budget the picked
    candidates leave, spent on streamed layers by calls (most first), until one does not fit."""
    if budget is None:
        return {}
    left = budget - sum(c.pinned for c in picked)
    ranked: list[tuple[int, int, int, int, int]] = []  # (-calls, component, rank, layer, bytes)
    for k, (component, cand) in enumerate(zip(components, picked, strict=True)):
        if not cand.pageable or cand.kind != PlacementKind.LAYERWISE:
            continue
        calls = layer_uses(component, targets)
        for rank, i in enumerate(cand.order[cand.kept :]):
            ranked.append((-calls[i], k, rank, i, component.layer_bytes[i]))
    chosen: dict[str, list[int]] = {}
    for minus_calls, k, _, i, size in sorted(ranked):
        if minus_calls == 0 or size > left:  # a layer never called saves nothing pinned
            break
        left -= size
        chosen.setdefault(components[k].name, []).append(i)
    return {name: tuple(sorted(layers)) for name, layers in chosen.items()}


def pinned_moved(component: Component, layers: Sequence[int], targets: Sequence[Target]) -> int:
    """The bytes moved from the pinned ``layers`` per request, weighted over ``targets``."""
    if not layers:
        return 0
    calls = layer_uses(component, targets)
    return sum(component.layer_bytes[i] * calls[i] for i in layers)


def ranges(layers: Sequence[int]) -> str:
    """``0-3,6``: layer indices as the ranges a report shows ("" for none)."""
    out: list[str] = []
    for i in sorted(layers):
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def frontier_bytes(components: Sequence[Component], pins: Mapping[str, Sequence[int]]) -> int:
    """The host bytes the frontier pins."""
    sizes = {c.name: c.layer_bytes for c in components}
    return sum(sizes[name][i] for name, layers in pins.items() for i in layers)
