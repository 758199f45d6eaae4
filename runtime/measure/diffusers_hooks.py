"""Instrument a diffusers pipeline: component hooks mark stages, the step callback iterations.

A diffusers pipeline does not say where its stages begin, so the recorder opens them from component
use (``AutoStages``): the text encoder's forward opens the text-encoding stage, the
transformer's the denoising stage (one iteration per ``callback_on_step_end``), ``vae.decode``
the decoding stage. ``prepare_latents`` closes the open stage (``run_pipeline``'s ``stage_breaks``):
the latents are prepared outside every stage.
Nothing here imports diffusers: any object with the pipeline's attributes works.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import torch
from torch import nn

from runtime.measure.recorder import AutoStages, FormulaPipeline, Request, WarmupRecorder


class DiffusersPipeline(Protocol):
    """What measuring (and calibration) uses of a diffusers ``DiffusionPipeline``: its components
    and its call."""

    @property
    def components(self) -> Mapping[str, object]: ...

    def __call__(self, *args: object, **kwargs: object) -> object: ...


#: diffusers' ``callback_on_step_end(pipe, step, timestep, callback_kwargs) -> callback_kwargs``.
StepEndCallback = Callable[[object, int, object, dict[str, object]], dict[str, object]]
#: The legacy ``callback(step, timestep, latents)``, called every ``callback_steps``.
LegacyStepCallback = Callable[[int, object, object], object]

#: Stage names of the Wan family as the formulas (and the serving code) name them.
WAN_STAGES = AutoStages(
    stage_for={
        "text_encoder": "TextEncodingStage",
        "image_encoder": "ImageEncodingStage",
        "transformer": "DenoisingStage",
        "transformer_2": "DenoisingStage",
        "vae": "DecodingStage",
    },
    iterative=frozenset({"DenoisingStage"}),
)

#: Components whose pipeline entry point is a method other than ``forward``.
ENTRY_POINTS = {"vae": "decode"}


def pipeline_modules(pipe: DiffusersPipeline) -> dict[str, nn.Module]:
    """The pipeline's ``nn.Module`` components by name (no schedulers, tokenizers or None)."""
    return {name: c for name, c in pipe.components.items() if isinstance(c, nn.Module)}


def diffusers_recorder(
    formulas: FormulaPipeline,
    pipe: DiffusersPipeline,
    device: str | torch.device = "auto",
    *,
    stages: AutoStages = WAN_STAGES,
    layerwise: Iterable[str] = ("transformer",),
    entry_points: Mapping[str, str | Sequence[str]] = ENTRY_POINTS,
    **options: Any,  # WarmupRecorder's own keyword arguments, each of its own type
) -> WarmupRecorder:
    """A recorder wired to ``pipe``: its modules hooked, stages opened from component use."""
    modules = pipeline_modules(pipe)
    return WarmupRecorder(
        formulas,
        device,
        components=modules,
        layerwise=tuple(c for c in layerwise if c in modules),
        entry_points={k: v for k, v in entry_points.items() if k in modules},
        auto_stages=stages,
        **options,
    )


def step_callback(req: Request, chained: StepEndCallback | None = None) -> StepEndCallback:
    """A ``callback_on_step_end`` ending the request's iteration, then calling ``chained``."""

    def on_step_end(
        pipe: object, step: int, timestep: object, callback_kwargs: dict[str, object]
    ) -> dict[str, object]:
        req.step_end()
        if chained is not None:
            return chained(pipe, step, timestep, callback_kwargs)
        return {}

    return on_step_end


#: Pipeline methods that start work outside every stage: an auto stage open when they run is closed.
STAGE_BREAKS = ("prepare_latents",)


def run_pipeline(
    pipe: DiffusersPipeline,
    req: Request,
    *,
    stage_breaks: Iterable[str] = STAGE_BREAKS,
    **kwargs: Any,  # the pipeline's own call arguments: each pipeline types its own
) -> Any:  # what the pipeline returns (a pipeline-specific diffusers output)
    """Call ``pipe(**kwargs)`` with the step callback installed; the caller maps the request's
    params onto ``kwargs`` (a pipeline's ``call_arguments``: its formulas' ``call`` facts).

    The step callback is ``callback_on_step_end``, or the legacy ``callback`` (at every step) for a
    pipeline that has only that one (``legacy_step_callback``).

    Each method of ``pipe`` named in ``stage_breaks`` closes the auto stage open when it starts
    (``Request.end_auto_stage``): stages open on component use and would otherwise hold, say, the
    latents' preparation in the text-encoding stage, which the formulas say does not grow with the
    shape. The work then counts in the request's peak, outside any stage.
    """
    if _takes_legacy_callback(pipe):
        every = kwargs.setdefault("callback_steps", 1)
        kwargs["callback"] = legacy_step_callback(req, kwargs.get("callback"), every)
        kwargs["callback_steps"] = 1
    else:
        kwargs["callback_on_step_end"] = step_callback(req, kwargs.get("callback_on_step_end"))
    with _breaking(pipe, req, tuple(stage_breaks)):
        return pipe(**kwargs)


def _takes_legacy_callback(pipe: DiffusersPipeline) -> bool:
    """Whether ``pipe`` reports steps only through the legacy ``callback(step, timestep, latents)``
    (PixArt, older pipelines): its ``__call__`` has ``callback`` but no ``callback_on_step_end``."""
    try:
        names = inspect.signature(pipe.__call__).parameters
    except (TypeError, ValueError):  # not introspectable: assume the current diffusers API
        return False
    return "callback" in names and "callback_on_step_end" not in names


def legacy_step_callback(
    req: Request, chained: LegacyStepCallback | None = None, every: int = 1
) -> LegacyStepCallback:
    """A legacy ``callback`` ending the request's iteration at every step, then calling ``chained``
    on the steps the caller asked for (its ``callback_steps``)."""

    def on_step(step: int, timestep: object, latents: object) -> None:
        req.step_end()
        if chained is not None and step % every == 0:
            chained(step, timestep, latents)

    return on_step


@contextlib.contextmanager
def _breaking(pipe: DiffusersPipeline, req: Request, names: tuple[str, ...]) -> Iterator[None]:
    """Wrap ``names`` on the instance for one call; the class's methods are never touched."""
    wrapped = []
    for name in names:
        original = getattr(pipe, name, None)
        if original is None or name in vars(pipe):
            continue  # not a method of this pipeline, or already wrapped by the caller

        def breaking(
            *args: object, _original: Callable[..., object] = original, **kw: object
        ) -> object:
            req.end_auto_stage()
            return _original(*args, **kw)

        setattr(pipe, name, breaking)
        wrapped.append(name)
    try:
        yield
    finally:
        for name in wrapped:
            delattr(pipe, name)
