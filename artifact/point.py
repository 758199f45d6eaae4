"""A workload point (a size: the params of one request) and its key: the one spelling every package
uses, from the command line to the records (``artifact.spelling.point_text`` prints it)."""

from __future__ import annotations

from collections.abc import Mapping

Point = Mapping[str, int | bool]
PointKey = tuple[tuple[str, int | bool], ...]


def point_key(point: Point) -> PointKey:
    """A point as a hashable key, the same whatever the order of its params (sizes are scanned with
    sets, not list membership)."""
    return tuple(sorted(point.items()))
