"""A diffusers pipeline seen through its formulas: which component opens which stage, and the call.

Everything the recorder needs to know about a pipeline is declared in its `.wf` file (`stage ...
uses vae.decode per step`, `call num_inference_steps = steps`, `probe height, width`) and read here
from the loaded formulas; no mapping table lives in library code. The checks say which declared
component the pipeline lacks, and which of the pipeline's modules no stage declares.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from fractions import Fraction
from types import MappingProxyType

from attrs import field, frozen

from artifact.point import Point
from calibration.errors import CalibrationError
from runtime import Pipeline

CallValue = int | float | bool

#: A point of the formulas' params (a shape): name -> value.


def _frozen_map(value: Mapping[str, object]) -> Mapping[str, object]:
    return MappingProxyType(dict(value))


@frozen
class PipelineFacts:
    """The recorder's wiring for one pipeline, read from its formulas."""

    stage_for: Mapping[str, str] = field(converter=_frozen_map)  # "vae.decode" / "unet" -> stage
    entry_points: Mapping[str, tuple[str, ...]] = field(converter=_frozen_map)
    stepped: frozenset[str]
    layerwise: tuple[str, ...]  # components of the stepped stages: their repeated layers
    undeclared: tuple[str, ...]  # the pipeline's modules that no stage uses


def pipeline_facts(formulas: Pipeline, modules: Mapping[str, object]) -> PipelineFacts:
    """The facts of ``formulas`` checked against the pipeline's modules (by component name).

    A stage that uses a component the pipeline does not have is a ``CalibrationError`` naming it
    and the components there are; a module no stage uses is listed in ``undeclared``.
    """
    stage_for: dict[str, str] = {}
    entry_points: dict[str, list[str]] = {}
    for stage, uses in formulas.uses.items():
        for use in uses:
            if use.component not in modules:
                raise CalibrationError(
                    f"{_at(formulas, f'stage {stage}')}pipeline {formulas.name!r}: stage {stage} "
                    f"uses component {use.component!r}, "
                    f"which the diffusers pipeline does not have (it has {', '.join(modules)}); "
                    "fix the stage's `uses` in the formula file"
                )
            module = modules[use.component]
            if use.method != "forward" and not _is_method(module, use.method):
                raise CalibrationError(
                    f"{_at(formulas, f'stage {stage}')}pipeline {formulas.name!r}: stage {stage} "
                    f"uses {use.component}.{use.method}, but {type(module).__name__} has no method "
                    f"{use.method!r}; fix the stage's `uses` in the formula file"
                )
            stage_for[f"{use.component}.{use.method}"] = stage
            methods = entry_points.setdefault(use.component, [])
            if use.method not in methods:
                methods.append(use.method)
    if not stage_for:
        raise CalibrationError(
            f"pipeline {formulas.name!r} declares no stage `uses`: the recorder cannot tell its "
            "stages apart; add e.g. `stage DenoisingStage uses transformer per step { ... }`"
        )
    stepped = frozenset(formulas.stepped_stages)
    layerwise = tuple(
        dict.fromkeys(use.component for stage in stepped for use in formulas.uses.get(stage, ()))
    )
    undeclared = tuple(name for name in modules if name not in entry_points)
    return PipelineFacts(
        stage_for,
        {name: tuple(methods) for name, methods in entry_points.items()},
        stepped,
        layerwise,
        undeclared,
    )


def _at(formulas: Pipeline, fact: str) -> str:
    """``path:line: `` of a fact, for the start of a message (empty when unknown)."""
    where = formulas.where(fact)
    return f"{where}: " if where else ""


def _is_method(module: object, name: str) -> bool:
    """Whether ``module.name`` is a public method (a class, a dunder: callable, not methods)."""
    found = getattr(module, name, None)
    return not name.startswith("_") and (inspect.ismethod(found) or inspect.isfunction(found))


def check_call(formulas: Pipeline, pipe: object) -> tuple[str, ...]:
    """Every `call` argument is a keyword of the pipeline's ``__call__``: a wrong one would fail
    every request with a ``TypeError`` (a ``CalibrationError`` naming the line now). A ``__call__``
    that takes ``**kwargs`` accepts any name and may ignore it: those are returned as warnings."""
    try:
        signature = inspect.signature(type(pipe).__call__)
    except (TypeError, ValueError):  # a builtin or C callable: nothing to read
        return ()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = signature.parameters.values()
    anything = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    names = [p.name for p in parameters if p.kind in kinds and p.name != "self"]
    warnings = []
    for arg in formulas.call_names:
        if arg in names:
            continue
        close = difflib.get_close_matches(arg, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        where = f"{_at(formulas, f'call {arg}')}pipeline {formulas.name!r}: `call {arg}`"
        if anything:
            warnings.append(
                f"{where} is not among the named arguments of {type(pipe).__name__}.__call__, "
                f"which takes **kwargs and may ignore it{hint}"
            )
            continue
        raise CalibrationError(
            f"{where} names an argument {type(pipe).__name__}.__call__ does not take{hint}; it "
            f"takes {', '.join(names)}; fix or remove the `call` line in the formula file"
        )
    return tuple(warnings)


def call_value(value: int | Fraction | bool) -> CallValue:
    """A formula value as a keyword argument: integral values stay ints, others become floats."""
    if isinstance(value, bool | int):
        return value
    return int(value) if value.denominator == 1 else float(value)


def call_arguments(formulas: Pipeline, params: Point) -> dict[str, CallValue]:
    """The pipeline's keyword arguments for a request at ``params`` (the formulas' `call` lines).

    A value no float can hold (``call x = w ** 64 / 3`` at a large ``w``) is a ``CalibrationError``
    naming the `call` line and the point: no request could pass it."""
    out: dict[str, CallValue] = {}
    for name, value in formulas.call_arguments(**params).items():
        try:
            out[name] = call_value(value)
        except OverflowError:
            bits = abs(int(value)).bit_length()
            raise CalibrationError(
                f"{_at(formulas, f'call {name}')}pipeline {formulas.name!r}: `call {name}` is "
                f"about 2**{bits - 1} at {_point(params)}, too large for a float argument; "
                "narrow the params' ranges or fix the `call` line in the formula file"
            ) from None
    return out


def _point(params: Point) -> str:
    """A point for a message, each value at most 30 digits (a huge one shows its size)."""
    return ",".join(
        f"{k}={v}" if isinstance(v, bool) or abs(v) < 10**30 else f"{k}=<{v.bit_length()} bits>"
        for k, v in params.items()
    )
