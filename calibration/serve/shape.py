"""A request's shape as the planner's ``Target``: each phase's activation bound at the request,
the calibration's onloads per component, and each streamed layer's calls carried to the
request's iterations (a layer called once per denoising step is called ``steps`` times)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from attrs import field, frozen

from artifact.ir import StageValues
from calibration.plan.inputs import target_name
from calibration.plan.model import Component, Phase, Target
from runtime.estimate import LayerUseEstimate


@frozen
class LayerCalls:
    """One layer's calls in one stage at the calibration's target, and that stage's iterations."""

    component: str
    layer: str
    stage: str | None
    calls: int
    iterations: int


def _uses(value: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(value))


@frozen
class ShapeTargets:
    """What a request's ``Target`` keeps of the calibration's: onloads and layer calls."""

    uses: Mapping[str, int] = field(converter=_uses, hash=False)
    layer_calls: tuple[LayerCalls, ...]
    layer_names: Mapping[str, tuple[str, ...]] = field(hash=False)  # streamable components

    @classmethod
    def of(
        cls, target: Target, components: Sequence[Component], uses: Sequence[LayerUseEstimate]
    ) -> ShapeTargets:
        """From the calibration's target and its estimate's layer uses."""
        recorded = set(target.layer_uses)
        calls = tuple(
            LayerCalls(u.component, u.layer, u.stage, u.calls, u.target_iterations or 0)
            for u in uses
            if u.component in recorded
        )
        names = {c.name: c.layer_names for c in components if c.name in recorded}
        return cls(target.uses, calls, MappingProxyType(names))

    def target(
        self,
        params: Mapping[str, int | bool],
        phases: Sequence[Phase],
        values: Mapping[str, StageValues],
        compute_s: float | None,
    ) -> Target:
        """The request's target (weight 1)."""
        per: dict[tuple[str, str], int] = {}
        for u in self.layer_calls:
            calls = u.calls
            if u.stage is not None and u.stage in values and u.iterations:
                calls = -(-u.calls * values[u.stage].iterations // u.iterations)
            per[(u.component, u.layer)] = per.get((u.component, u.layer), 0) + calls
        layer_uses = {
            c: tuple(per.get((c, layer), 0) for layer in names)
            for c, names in self.layer_names.items()
        }
        return Target(target_name(params), tuple(phases), self.uses, layer_uses, 1, compute_s)
