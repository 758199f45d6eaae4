"""The formulas' probe minimums (`probe frames >= 9`): below one a stage is not in its steady
regime (a video VAE decodes its first latent frames differently), so no planned probe goes below
it, and a probe asked for below it is a warning naming the axis and the minimum."""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen

from artifact.point import Point
from runtime import Pipeline

#: Values tried above a minimum for one the contracts admit (`frames % 4 == 1`: at most 3 more).
SEARCH = 64


@frozen
class BelowMinimum:
    """A size that sets a probe axis below the formulas' declared minimum."""

    role: str  # "probe" or "warmup"
    axis: str
    value: int
    minimum: int

    @property
    def message(self) -> str:
        return (
            f"the {self.role} sets {self.axis} = {self.value}, below the formulas' probe minimum "
            f"{self.axis} >= {self.minimum}: the stage is not in its steady regime there, so "
            "estimates extrapolated from it may be off"
        )


def smallest_at_or_above(pipeline: Pipeline, point: Point, axis: str, minimum: int) -> int:
    """The smallest value of ``axis`` at or above ``minimum`` admissible with ``point``'s other
    params (within SEARCH values; else ``minimum`` itself)."""
    for value in range(minimum, minimum + SEARCH):
        if pipeline.is_admissible(**{**point, axis: value}):
            return value
    return minimum


def raise_to_minimums(
    pipeline: Pipeline, point: Point, ceiling: Point | None = None
) -> dict[str, int | bool]:
    """``point`` with each probe axis it sets below its minimum raised to the smallest admissible
    value at or above it, never above ``ceiling``'s value (a target below the minimum caps it)."""
    raised = dict(point)
    for axis, minimum in pipeline.probe_minimums.items():
        value = raised.get(axis)
        if isinstance(value, bool) or value is None or value >= minimum:
            continue
        cap = None if ceiling is None else ceiling.get(axis)
        if isinstance(cap, int) and not isinstance(cap, bool) and cap < minimum:
            raised[axis] = max(value, cap)
            continue
        raised[axis] = smallest_at_or_above(pipeline, raised, axis, minimum)
    return raised


def below_minimums(pipeline: Pipeline, points: Mapping[str, Point]) -> tuple[BelowMinimum, ...]:
    """Each (role, axis) of ``points`` (role -> size) set below its declared minimum."""
    found = []
    for role, point in points.items():
        for axis, minimum in pipeline.probe_minimums.items():
            value = point.get(axis)
            if isinstance(value, int) and not isinstance(value, bool) and value < minimum:
                found.append(BelowMinimum(role, axis, value, minimum))
    return tuple(found)
