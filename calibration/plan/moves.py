"""The order of a placement change's moves: every release before any acquire (pure, no torch).

``calibration.plan.apply`` cuts each planned component into parts (the rest, each repeated layer),
asks ``move_order`` for the order of its moves from where the parts are to where the plan puts
them, and makes them in that order: the device total falls to its least, then rises to the
target's, so it never exceeds the larger of the totals before and after the change.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from enum import Enum

from attrs import frozen


class MoveKind(str, Enum):
    """Which way a move goes: bytes leaving the device, or arriving on it."""

    RELEASE = "release"
    ACQUIRE = "acquire"


@frozen
class Move:
    """One step of a placement change: a component's bytes leaving or arriving on the device."""

    component: str
    kind: MoveKind
    bytes: int


#: The part of a component that is not one of its repeated layers (the whole of most components).
REST = ""


def move_order(
    sizes: Mapping[str, Mapping[str, int]],
    current: Mapping[str, Collection[str]],
    target: Mapping[str, Collection[str]],
) -> tuple[Move, ...]:
    """The moves from ``current`` to ``target``, every release before any acquire.

    ``sizes[component][part]`` is a part's bytes (``REST``, each layer); ``current`` and ``target``
    name each component's parts on the device. A component whose target leaves a part off the
    device releases; one whose target keeps a part on it acquires (a layerwise one does both).
    Releases come first, so the device total falls to its least and then rises to the target's:
    it never exceeds the larger of the totals before and after."""
    releases: list[Move] = []
    acquires: list[Move] = []
    for name, parts in sizes.items():
        now, after = set(current.get(name, ())), set(target.get(name, ()))
        if set(parts) - after:
            releases.append(Move(name, MoveKind.RELEASE, sum(parts[p] for p in now - after)))
        if after:
            acquires.append(Move(name, MoveKind.ACQUIRE, sum(parts[p] for p in after - now)))
    return (*releases, *acquires)


def device_totals(
    moves: Sequence[Move],
    sizes: Mapping[str, Mapping[str, int]],
    current: Mapping[str, Collection[str]],
) -> list[int]:
    """The device's total before the moves and after each one, in order."""
    total = sum(parts[p] for name, parts in sizes.items() for p in current.get(name, ()))
    out = [total]
    for move in moves:
        total += move.bytes if move.kind is MoveKind.ACQUIRE else -move.bytes
        out.append(total)
    return out
