"""Factories for `dslc infer --pipeline` that misbehave the way a user's pipeline can.

Each is the tiny SD 1.5 of ``calibration.examples.tiny_sd`` (random weights, built offline) whose
step callback (a ``call_kwargs`` argument diffusers runs after every denoising step) raises, exits
the interpreter or hangs, at every size or only at sizes taller than 40 pixels; ``empty`` is a
callable with no modules at all.
"""

from __future__ import annotations

import sys
import threading

from calibration.examples import tiny_sd

#: Where ``tall_raising`` raises: latents taller than this many pixels (8 per latent row).
TALL = 40
#: Where ``tall_hanging`` hangs: only the tallest sizes of a ladder from height 16 (each costs the
#: request's whole wall-clock bound).
TALLER = 72


def _misbehave(pipe: object, step: int, timestep: object, kwargs: dict[str, object]) -> dict:
    how = getattr(pipe, "hostile", "")
    latents = kwargs["latents"]
    pixels = latents.shape[-2] * 8  # type: ignore[attr-defined]
    if how == "exit":
        sys.exit(0)
    if how == "tall_raise" and pixels > TALL:
        raise RuntimeError(f"taller than {TALL} pixels")
    if how == "tall_hang" and pixels > TALLER:
        threading.Event().wait()  # never set: only the request's wall-clock bound ends it
    return {}


def call_kwargs(seed: int = 0) -> dict[str, object]:
    return {**tiny_sd.call_kwargs(seed), "callback_on_step_end": _misbehave}


def _with(how: str, seed: int) -> object:
    pipe = tiny_sd.build(seed)
    pipe.hostile = how  # type: ignore[attr-defined]  # read by the step callback
    return pipe


def exiting(seed: int = 0) -> object:
    return _with("exit", seed)


def tall_raising(seed: int = 0) -> object:
    return _with("tall_raise", seed)


def tall_hanging(seed: int = 0) -> object:
    return _with("tall_hang", seed)


class Empty:
    """A "pipeline" with no modules: nothing for infer to hook."""

    def __init__(self) -> None:
        self.components: dict[str, object] = {"scheduler": None}

    def __call__(self, **kwargs: object) -> None:
        return None


def empty(seed: int = 0) -> Empty:
    return Empty()
