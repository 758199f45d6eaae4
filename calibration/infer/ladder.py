"""The sizes `dslc infer` measures: a bounded ladder of cheap admissible points around a base.

From the base (the example's warmup shape, or ``--base``), along each int param: the steps param
from 1 up to ``STEPS_UP`` above the base, a frame-like param (a `P % k == 1` contract) from its
smallest value, the others a level or two up; then a two-level factorial over the non-steps params
(products need joint moves) and held-out sizes two levels up. ``MAX_SIZES`` bounds the count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import islice, product

from attrs import frozen

from calibration.infer.terms import Point, contract_modulus
from runtime import FormulaError, Pipeline

#: The most sizes one ladder holds (both parts together).
MAX_SIZES = 48
#: The most step counts tried for one part of the steps ladder (a base of 10**9 steps: not all).
MAX_TRIES = 1024
#: How far above the base the steps param climbs (a scheduler's history saturates within 4).
STEPS_UP = 4
#: How many values a frame-like param takes from its smallest up to the base.
FRAME_LEVELS = 7
#: The least a param other than a frame-like one moves a level: pixels by 32 keep the latents a
#: multiple of a UNet's downsampling (at 8-pixel strides, a 3-level UNet's activations round).
MIN_STRIDE = 32


@frozen
class Size:
    """One size to measure and why; ``held_out`` sizes check the fits but never enter them."""

    point: Mapping[str, int | bool]
    why: str
    held_out: bool = False


def stride(pipeline: Pipeline, param: str) -> int:
    """A level of ``param``: its contract's modulus for a frame-like one, else at least 32."""
    modulus = contract_modulus(pipeline.params[param].contracts, param)
    if modulus is not None and modulus[1] == 1:
        return modulus[0]
    k = modulus[0] if modulus is not None else 1
    return k * -(-MIN_STRIDE // k)


def int_params(pipeline: Pipeline) -> list[str]:
    return [n for n, p in pipeline.params.items() if p.type == "int"]


def steps_param(pipeline: Pipeline) -> str | None:
    """The param passed as ``num_inference_steps`` (else one named ``steps``)."""
    for name in int_params(pipeline):
        try:
            args = pipeline.call_arguments(**{**pipeline.default_workload, name: 1})
            again = pipeline.call_arguments(**{**pipeline.default_workload, name: 2})
        except FormulaError:  # an inadmissible point: not this param
            continue
        if args.get("num_inference_steps") == 1 and again.get("num_inference_steps") == 2:
            return name
    return "steps" if "steps" in int_params(pipeline) else None  # a bool `steps` is no count


def _frame_like(pipeline: Pipeline, param: str) -> bool:
    modulus = contract_modulus(pipeline.params[param].contracts, param)
    return modulus is not None and modulus[1] == 1


def _add(
    out: list[Size],
    pipeline: Pipeline,
    point: dict[str, int | bool],
    why: str,
    held_out: bool = False,
) -> None:
    if len(out) >= MAX_SIZES or not pipeline.is_admissible(**point):
        return
    if any(dict(s.point) == point for s in out):
        return
    out.append(Size(point, why, held_out))


def plan(pipeline: Pipeline, base: Point) -> list[Size]:
    """The first part of the ladder: base, one param at a time, the factorial, the held-out."""
    base = dict(base)
    out: list[Size] = []
    _add(out, pipeline, base, "base")
    steps = steps_param(pipeline)
    axes = [p for p in int_params(pipeline) if p != steps]
    if steps is not None:
        low = pipeline.params[steps].min or 1
        for v in islice(range(low, int(base[steps]) + STEPS_UP + 1), MAX_TRIES):
            _add(out, pipeline, {**base, steps: v}, f"{steps} alone")
    for p in axes:
        d = stride(pipeline, p)
        if _frame_like(pipeline, p):
            low = pipeline.params[p].min or 1
            top = int(base[p]) + 2 * d
            top -= (top - 1) % d  # the largest 1 + k * d at most base + 2 d, never enumerated
            values = [v for v in range(top - (FRAME_LEVELS - 1) * d, top + 1, d) if v >= low]
        else:
            values = [int(base[p]) + j * d for j in (1, 2)]
        for v in values:
            _add(out, pipeline, {**base, p: v}, f"{p} alone")
    for levels in product((0, 1), repeat=len(axes)):
        point = {
            **base,
            **{p: int(base[p]) + j * stride(pipeline, p) for p, j in zip(axes, levels)},
        }
        _add(out, pipeline, point, "jointly (" + ", ".join(axes) + ")")
    up2 = {p: int(base[p]) + 2 * stride(pipeline, p) for p in axes}
    _add(out, pipeline, {**base, **up2}, "held out: every param two levels up", True)
    if steps is not None:
        _add(
            out,
            pipeline,
            {**base, **up2, steps: int(base[steps]) + 2},
            f"held out: {steps} with every param up",
            True,
        )
    return out


def steps_across(pipeline: Pipeline, base: Point, measured: Sequence[Size]) -> list[Size]:
    """The second part, when memory moves with steps: the steps ladder again one level up in
    every other param (a history term multiplies the latent size)."""
    steps = steps_param(pipeline)
    if steps is None:
        return []
    axes = [p for p in int_params(pipeline) if p != steps]
    up = {**dict(base), **{p: int(base[p]) + stride(pipeline, p) for p in axes}}
    out = list(measured)
    low = pipeline.params[steps].min or 1
    for v in islice(range(low, int(base[steps]) + STEPS_UP + 1), MAX_TRIES):
        _add(out, pipeline, {**up, steps: v}, f"{steps} one level up")
    return out[len(measured) :]
