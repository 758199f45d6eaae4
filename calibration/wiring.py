"""A diffusers pipeline seen through its formulas: which component opens which stage, and the call.

Everything the recorder needs to know about a pipeline is declared in its `.wf` file (`stage ...
uses vae.decode per step`, `call num_inference_steps = steps`, `probe height, width`) and read here
from the loaded formulas; no mapping table lives in library code. The checks say which declared
component the pipeline lacks, and which of the pipeline's modules no stage declares.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from types import MappingProxyType

from attrs import field, frozen

from calibration.errors import CalibrationError
from runtime import Pipeline

CallValue = int | float | bool


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
                    f"pipeline {formulas.name!r}: stage {stage} uses component {use.component!r}, "
                    f"which the diffusers pipeline does not have (it has {', '.join(modules)}); "
                    "fix the stage's `uses` in the formula file"
                )
            module = modules[use.component]
            if use.method != "forward" and not callable(getattr(module, use.method, None)):
                raise CalibrationError(
                    f"pipeline {formulas.name!r}: stage {stage} uses {use.component}.{use.method}, "
                    f"but {type(module).__name__} has no method {use.method!r}"
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


def call_value(value: int | Fraction | bool) -> CallValue:
    """A formula value as a keyword argument: integral values stay ints, others become floats."""
    if isinstance(value, bool | int):
        return value
    return int(value) if value.denominator == 1 else float(value)


def call_arguments(formulas: Pipeline, params: Mapping[str, int | bool]) -> dict[str, CallValue]:
    """The pipeline's keyword arguments for a request at ``params`` (the formulas' `call` lines)."""
    return {k: call_value(v) for k, v in formulas.call_arguments(**params).items()}
