"""A placement's measured compute cost kept: the seconds a validation measured above a plan's
prediction, per placement, fed into the prediction of the same placement next time.

A streamed DiT whose compute slows down (its hooks' per-call work, copies the model does not see)
is measured slower than predicted; that extra belongs to the placement, not to the link or to
every plan: ``MeasuredCosts.learn`` keeps it under the placement's key, ``charge`` adds it to a
later plan of the same placement (a re-plan, a fallback, a saved plan read again). Pure: no
torch. See docs/planning.md "A placement's measured cost".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

import attrs
from attrs import field, frozen

from calibration.plan.model import Plan, PlanInputError

MAX_COSTS = 1000  # placements remembered (a worker tries a few; a saved file is bounded)


def placement_key(plan: Plan) -> str:
    """A placement as text: each component's kind and the layers it keeps."""
    return ";".join(
        f"{p.component}={p.kind.value}:{','.join(map(str, p.resident_layers))}"
        for p in plan.placements
    )


def _seconds(value: Mapping[str, float]) -> Mapping[str, float]:
    if len(value) > MAX_COSTS:
        raise PlanInputError(f"{len(value):,} measured placement costs; at most {MAX_COSTS:,}")
    for key, seconds in value.items():
        if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds < 0:
            raise PlanInputError(f"measured cost of {key!r} must be seconds >= 0, got {seconds!r}")
    return MappingProxyType({str(k): float(v) for k, v in value.items()})


@frozen
class MeasuredCosts:
    """Seconds per request measured above the prediction, by placement (``placement_key``)."""

    extra_s: Mapping[str, float] = field(factory=dict, converter=_seconds, hash=False)

    def learn(self, plan: Plan, measured_s: float, predicted_s: float | None) -> MeasuredCosts:
        """Keep what ``plan``'s placement measured above ``predicted_s``, its prediction without
        a kept cost (as the validation judges it): the largest seen; unchanged when it was not
        above it or nothing was predicted."""
        if predicted_s is None or not math.isfinite(measured_s):
            return self
        key = placement_key(plan)
        extra = measured_s - predicted_s
        if extra <= self.extra_s.get(key, 0.0):
            return self
        return MeasuredCosts({**self.extra_s, key: extra})

    def of(self, plan: Plan) -> float:
        """The seconds kept for ``plan``'s placement (0: none measured)."""
        return self.extra_s.get(placement_key(plan), 0.0)

    def charge(self, plan: Plan) -> Plan:
        """``plan`` with its placement's kept cost in each target's predicted time."""
        extra = self.of(plan)
        if not plan.feasible:
            return plan
        times = tuple(attrs.evolve(t, measured_extra_s=extra) for t in plan.times)
        return attrs.evolve(plan, times=times)

    def document(self) -> dict[str, float]:
        """As JSON: placement key -> seconds."""
        return dict(self.extra_s)
