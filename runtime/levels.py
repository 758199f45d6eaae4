"""The activations' own peak per amount of weights on the device (a phase's weights levels): under
offload a phase's peak may hold its largest group with few activations while its activations peak
under a smaller group, and a peak predicted from the largest weights plus the largest activations
is over by that gap. Kept exact, one (weights, activations) pair a level seen, up to
``MAX_WEIGHT_LEVELS`` of them (the writer and the loader read this one limit); beyond, their pareto
frontier merged upward to that many (never under).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import pairwise

#: A phase records at most this many (weights, activations) levels; more are merged upward (a
#: component offloaded block by block holds one level a block group, and a pair of them at a move).
MAX_WEIGHT_LEVELS = 32

Level = tuple[int, int]  # (weights on the device, the activations' own peak while they were)


def frontier(levels: Mapping[int, int], limit: int = MAX_WEIGHT_LEVELS) -> tuple[Level, ...]:
    """The levels no other level covers (more weights and more activations), fewest weights first,
    at most ``limit``: beyond it two neighbours merge into (the larger weights, the larger
    activations), the pair whose merged peak exceeds theirs least (never under either)."""
    kept: list[Level] = []
    for weights in sorted(levels, reverse=True):  # most weights first: keep the higher activations
        activations = max(levels[weights], 0)  # (a reset below the weights: none)
        if not kept or activations > kept[-1][1]:
            kept.append((weights, activations))
    kept.reverse()  # fewest weights (most activations) first
    while len(kept) > max(limit, 1):
        excess = [(w2 + a1) - max(w1 + a1, w2 + a2) for (w1, a1), (w2, a2) in pairwise(kept)]
        i = excess.index(min(excess))
        kept[i : i + 2] = [(kept[i + 1][0], kept[i][1])]
    return tuple(kept)


def bounded(levels: Mapping[int, int]) -> tuple[Level, ...]:
    """Every level, fewest weights first, where they are at most ``MAX_WEIGHT_LEVELS``; else their
    frontier merged to that many (each level under a kept one)."""
    if len(levels) <= MAX_WEIGHT_LEVELS:
        return tuple(sorted((w, max(a, 0)) for w, a in levels.items()))
    return frontier(levels)


def merged(*sides: Iterable[Level]) -> tuple[Level, ...]:
    """Several records' levels as one: each weights level at its highest activations."""
    highest: dict[int, int] = {}
    for side in sides:
        for weights, activations in side:
            highest[weights] = max(highest.get(weights, activations), activations)
    return bounded(highest)


def activations_at(levels: Iterable[Level], weights: int) -> int | None:
    """The activations' own peak while ``weights`` were on the device, else the highest while more
    were (where levels merged, the merged one covers it); None where no level held as many."""
    seen = list(levels)
    exact = [a for w, a in seen if w == weights]
    above = exact or [a for w, a in seen if w >= weights]
    return max(above) if above else None
