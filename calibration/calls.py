"""What makes two requests comparable: a fresh scheduler, and only the keywords ``pipe`` takes.

Nothing here imports torch or diffusers: any object with the pipeline's ``components`` and
``__call__`` works.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
