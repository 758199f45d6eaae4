"""Layer uses: how often each layer of a layerwise component runs per stage at the target.

Per stage, ``ceil(calls × target iterations / measured iterations)``: a probe runs few steps, and
each stage's own iteration counts carry its calls (independent loops are not all multiplied by one
request-wide ratio). A layer used at most once in a stage stays as measured (a one-shot pass does
not repeat with the steps), and so do uses outside any stage. Across records the largest figure
wins.
"""

from __future__ import annotations

from fractions import Fraction

from runtime.estimate.points import Workload, ceil_bytes, measured_iterations
from runtime.estimate.results import LayerUseEstimate
from runtime.record import LayerUse


def _one(use: LayerUse, measured: int | None, target: int | None) -> LayerUseEstimate:
    def kept(reason: str) -> LayerUseEstimate:
        return LayerUseEstimate(
            use.component,
            use.layer,
            use.stage,
            use.calls,
            use.calls,
            "measurement",
            reason,
            measured,
            target,
        )

    if use.stage is None:
        return kept("used outside any stage: kept as measured")
    if measured is None or target is None:
        return kept(f"stage {use.stage!r} is not in the formulas: kept as measured")
    if use.calls <= 1:
        return kept("used at most once in its stage: kept as measured")
    if measured <= 0:
        return kept("the stage recorded no iterations: kept as measured")
    calls = ceil_bytes(Fraction(use.calls * target, measured))
    return LayerUseEstimate(
        use.component,
        use.layer,
        use.stage,
        calls,
        use.calls,
        "scaled",
        f"ceil({use.calls} x {target} / {measured}) by the stage's iterations",
        measured,
        target,
    )


def layer_uses(work: Workload) -> tuple[LayerUseEstimate, ...]:
    """One estimate per (component, layer, stage), in order of first appearance; the largest across
    records.
    """
    best: dict[tuple[str, str, str | None], LayerUseEstimate] = {}
    for _, record, values in work.ok:
        for use in record.layer_uses:
            known = use.stage is not None and use.stage in work.target_values
            measured = measured_iterations(record, use.stage, values) if known else None  # type: ignore[arg-type]
            target = work.target_iterations(use.stage) if known else None  # type: ignore[arg-type]
            estimate = _one(use, measured, target)
            key = (use.component, use.layer, use.stage)
            if key not in best or estimate.calls >= best[key].calls:
                best[key] = estimate
    return tuple(best.values())
