"""A size (a point of the workload's params) and its key."""

from __future__ import annotations

from collections.abc import Mapping

Point = Mapping[str, int | bool]
PointKey = tuple[tuple[str, int | bool], ...]


def point_key(point: Point) -> PointKey:
    """A point as a hashable key, the same whatever the order of its params (sizes are scanned with
    sets, not list membership)."""
    return tuple(sorted(point.items()))
