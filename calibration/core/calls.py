"""What makes two requests comparable: a fresh scheduler, and only the keywords ``pipe`` takes; and
which `call` arguments a ``**kwargs`` pipeline was seen to use.

Nothing here imports torch or diffusers: any object with the pipeline's ``components`` and
``__call__`` works.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import TYPE_CHECKING

from attrs import frozen

from calibration.core.wiring import CallValue, call_arguments
from runtime.record import WarmupRecord

if TYPE_CHECKING:
    from runtime import Pipeline
    from runtime.measure.diffusers_hooks import DiffusersPipeline


#: What a request passes besides the formulas' `call` arguments, when the pipeline takes it.
DEFAULT_CALL: Mapping[str, object] = {"prompt": "a cat dancing", "output_type": "pt"}


def reset_scheduler(pipe: DiffusersPipeline) -> None:
    """Give ``pipe`` a fresh scheduler of the same class and config.

    Schedulers keep request state: the last timesteps and sigmas, and multistep ones (PNDM, DPM++,
    UniPC) their last model outputs, sized by the latents. Without a reset that history leaks into
    the next request's baseline and peaks, so two requests of one shape measure differently.
    """
    scheduler = pipe.components.get("scheduler")
    config = getattr(scheduler, "config", None)
    from_config = getattr(type(scheduler), "from_config", None)
    if scheduler is None or config is None or from_config is None:
        return
    setattr(pipe, "scheduler", from_config(config))  # noqa: B010 - not every pipeline has one


def accepted(pipe: DiffusersPipeline, kwargs: Mapping[str, object]) -> dict[str, object]:
    """The keyword arguments ``pipe.__call__`` takes (all of them when it takes ``**kwargs``)."""
    try:
        parameters = inspect.signature(pipe.__call__).parameters
    except (TypeError, ValueError):
        return dict(kwargs)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in parameters}


@frozen
class UnprovenCall:
    """A `call` argument ``__call__`` takes only through ``**kwargs`` and no measured pair of sizes
    showed to change the call's work or memory: the formula's fact may never reach the pipeline."""

    arg: str
    seen: tuple[CallValue, CallValue] | None  # two values measured alike, None: never moved alone

    @property
    def message(self) -> str:
        if self.seen is None:
            why = "no two measured sizes differ in it alone"
        else:
            why = f"measured at {self.arg}={self.seen[0]} and {self.seen[1]}: same memory and work"
        return f"`call {self.arg}` may never reach the pipeline ({why})"


def unnamed_calls(formulas: Pipeline, pipe: object) -> tuple[str, ...]:
    """The `call` arguments ``type(pipe).__call__`` does not name (it takes ``**kwargs``)."""
    try:
        parameters = inspect.signature(type(pipe).__call__).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: nothing to read
        return ()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = {p.name for p in parameters if p.kind in kinds}
    return tuple(arg for arg in formulas.call_names if arg not in named)


def footprint(record: WarmupRecord) -> tuple[object, ...]:
    """What a call's arguments can change, exactly: each phase's count and peak above its start, the
    request's peak, the counted iterations and the layer uses (never a duration: clocks are noisy).
    """
    return (
        record.peak_allocated - record.baseline_allocated,
        tuple(
            (p.kind, p.name, p.stage, p.count, p.peak_allocated - p.allocated_before)
            for p in record.phases
        ),
        tuple((s.stage, s.measured) for s in record.stage_iterations if s.source != "formula"),
        tuple((u.component, u.layer, u.stage, u.calls) for u in record.layer_uses),
    )


def _one_axis(formulas: Pipeline, a: WarmupRecord, b: WarmupRecord) -> bool:
    """Whether ``a`` and ``b`` differ in one param, or only within one `probe` group."""
    moved = {k for k, v in a.params.items() if b.params.get(k) != v}
    return len(moved) == 1 or any(moved <= set(group) for group in formulas.probe_axes)


def unproven_calls(
    formulas: Pipeline, pipe: object, records: Sequence[WarmupRecord]
) -> tuple[UnprovenCall, ...]:
    """The unnamed `call` arguments no pair of ``records`` shows used: a pair moving one param (or
    one `probe` group) whose differing arguments are all unnamed, with a different ``footprint``,
    shows each of them used (at least one is, and the group moves together by declaration)."""
    unnamed = unnamed_calls(formulas, pipe)
    if not unnamed:
        return ()
    ok = [r for r in records if r.ok]
    values = [call_arguments(formulas, r.params) for r in ok]
    used: set[str] = set()
    alike: dict[str, tuple[CallValue, CallValue]] = {}
    for i, j in combinations(range(len(ok)), 2):
        differ = {k for k, v in values[i].items() if values[j][k] != v}
        if not differ or not differ <= set(unnamed) or not _one_axis(formulas, ok[i], ok[j]):
            continue
        if footprint(ok[i]) != footprint(ok[j]):
            used |= differ
        else:
            for arg in differ:
                low, high = sorted((values[i][arg], values[j][arg]))
                alike.setdefault(arg, (low, high))
    return tuple(UnprovenCall(arg, alike.get(arg)) for arg in unnamed if arg not in used)
