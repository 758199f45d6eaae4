"""One Python facade in the diffusers habit: calibrate a pipeline you hold, plan it, apply the plan.

    cal = calibrate(pipe, "formulas/flux.wf", target={...}, probe={...})
    plan = cal.plan(capacity="24GiB")
    handle = plan.apply(pipe)          # ... serve ...
    handle.undo()

``plan.to_accelerate()`` gives the ``device_map``/``max_memory`` the plan amounts to, and
``plan.to_diffusers()`` the offloading calls a diffusers user would write. A pipeline that already
carries diffusers' offloading (``enable_model_cpu_offload``, group offloading) is adopted: its hooks
come off and it is calibrated under the same mechanism, with a warning that says so (or, with
``hooks="remove"``, calibrated whole). The commands (`dslc calibrate`, `dslc plan`) run the same
code: ``calibrate_configured``, ``plan_inputs``, ``solve`` and ``apply``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import frozen

from artifact.point import Point
from artifact.spelling import path_text
from artifact.units import parse_size
from calibration.calibrate.run import Calibration
from calibration.core.offload import Offload
from calibration.errors import CalibrationError
from calibration.plan.model import Device, PlacementKind, Plan
from runtime.estimate.results import DEFAULT_MARGIN

if TYPE_CHECKING:
    from calibration.plan.apply import Applied
    from runtime.measure.diffusers_hooks import DiffusersPipeline

#: What ``calibrate`` does with offloading hooks already on the pipeline.
HOOKS = ("adopt", "remove")


class PipelineHooksWarning(UserWarning):
    """The pipeline carried diffusers' offloading hooks; the calibration took them off."""


def _size(value: int | str, what: str) -> int:
    """``24GiB`` or bytes, as the command line reads them (``CalibrationError`` naming ``what``)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise CalibrationError(f"{what}: bytes or a size like '24GiB', not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise CalibrationError(f"{what}: {value} is negative")
        return value
    try:
        return parse_size(value)
    except ValueError as exc:
        raise CalibrationError(f"{what}: {exc}") from None


def _adopted(pipe: DiffusersPipeline, hooks: str) -> Offload:
    """The offloading already on ``pipe`` taken off: the mechanism to calibrate under
    (``adopt``: the same one; ``remove``: none), and a warning that says what was done."""
    from calibration.placement.mechanisms import GROUP, MODEL
    from calibration.placement.pipeline import remove_group_offload, remove_model_offload
    from runtime.measure.diffusers_hooks import pipeline_modules

    if hooks not in HOOKS:
        raise CalibrationError(f"hooks={hooks!r}: one of {', '.join(HOOKS)}")
    modules = pipeline_modules(pipe)
    grouped = [name for name, module in modules.items() if GROUP.installed(module)]
    modelled = [name for name, module in modules.items() if MODEL.installed(module)]
    if not grouped and not modelled:
        return Offload.AUTO
    found = Offload.GROUP if grouped else Offload.MODEL
    remove_group_offload(modules)
    remove_model_offload(pipe)
    under = found if hooks == "adopt" else Offload.NONE
    warnings.warn(
        f"the pipeline carried diffusers' {found.value} offloading on "
        f"{', '.join(sorted(set(grouped + modelled)))}: its hooks are off, and it is calibrated "
        + (f"under {found.value} offload as it was" if hooks == "adopt" else "whole")
        + "; plan.apply(pipe) places it as planned",
        PipelineHooksWarning,
        stacklevel=3,
    )
    return under


def calibrate(
    pipe: DiffusersPipeline,
    formulas: str | Path,
    *,
    target: Point,
    probe: Point,
    warmup: Point | None = None,
    name: str | None = None,
    device: str = "cpu",
    repeat: int = 3,
    margin: float = DEFAULT_MARGIN,
    call_kwargs: Callable[[int], Mapping[str, object]] | None = None,
    time_probe: bool = True,
    hooks: str = "adopt",
) -> Calibrated:
    """``pipe`` calibrated through the pipeline ``name`` of ``formulas`` (a .wf file or a folder;
    ``name`` may be left out when it holds one): probed at ``probe``, extrapolated to ``target``."""
    from calibration.calibrate.pipeline import Built, calibrate_configured
    from calibration.calibrate.run import load_pipeline
    from calibration.core.config import RunConfig
    from calibration.core.shapes import Shapes
    from calibration.probes.time_probe import TIME_TOLERANCE

    path = Path(formulas)
    loaded = load_pipeline(path, name if name is not None else _only_pipeline(path))
    under = _adopted(pipe, hooks)
    config = RunConfig(
        device=device,
        margin=margin,
        repeat=repeat,
        time_tolerance=TIME_TOLERANCE if time_probe else None,
        offload=under,
    )
    given = Shapes(dict(warmup or {}), dict(probe), dict(target))
    built = Built(lambda seed: pipe, loaded, given, call_kwargs, type(pipe).__name__, str(path))
    return Calibrated(calibrate_configured(built, given, config), device)


def _only_pipeline(path: Path) -> str:
    """The one pipeline ``path`` holds (``CalibrationError`` naming them when it holds several)."""
    from dslc.build import NotCompiled, load_sources

    try:
        names = sorted(load_sources([path]))
    except NotCompiled as exc:
        raise CalibrationError(str(exc)) from None
    if len(names) != 1:
        held = ", ".join(names) or "none"
        raise CalibrationError(
            f"{path_text(path)} holds {held}: pass name= (the pipeline to calibrate)"
        )
    return names[0]


@frozen
class Calibrated:
    """A calibration and the device it ran on; ``plan`` places it on a device of a capacity."""

    calibration: Calibration
    device: str

    def plan(
        self, capacity: int | str, *, reserve: int | str | None = None, device: str = "cuda"
    ) -> Planned:
        """The exact plan for a device of ``capacity`` (bytes or '24GiB') keeping ``reserve``
        free (default: an accelerator allocator's margin); ``CalibrationError`` when nothing
        fits, naming what overflows."""
        from calibration.lifecycle.steps import plan_inputs
        from calibration.plan.solver import solve

        spec = Device(
            _size(capacity, "capacity"),
            reserve_bytes=None if reserve is None else _size(reserve, "reserve"),
        )
        components, targets = plan_inputs(self.calibration)
        plan = solve(components, targets, spec)
        if not plan.feasible:
            raise CalibrationError(f"nothing fits: {plan.reason}")
        return Planned(plan, device)


#: The placements whose component lives on the host between its uses.
_ON_THE_HOST = frozenset({PlacementKind.OFFLOADED, PlacementKind.GROUPED})


@frozen
class Planned:
    """A feasible plan for ``device``: applied to a pipeline, or spelt as accelerate's or
    diffusers' own calls."""

    plan: Plan
    device: str

    def apply(self, pipe: DiffusersPipeline, offload_device: str = "cpu") -> Applied:
        """The plan installed on ``pipe`` (its ``undo()`` takes every hook off, every module
        home)."""
        from calibration.plan.apply import apply

        return apply(self.plan, pipe, self.device, offload_device)

    def to_accelerate(self) -> dict[str, object]:
        """accelerate's ``device_map`` (resident components on the device, the others on the
        CPU) and ``max_memory`` (the device's usable bytes) the plan amounts to; a layerwise
        component maps to the device with its streamed blocks left to ``to_diffusers``."""
        device_map = {
            p.component: "cpu" if p.kind in _ON_THE_HOST else self.device
            for p in self.plan.placements
        }
        index = self.device.partition(":")[2] or 0
        usable = max(self.plan.device.usable_bytes, 0)
        return {"device_map": device_map, "max_memory": {index: usable}}

    def to_diffusers(self) -> list[str]:
        """The diffusers calls that place the pipeline as planned, one a component (streamed
        blocks as block-level group offloading of that component)."""
        calls = []
        for p in self.plan.placements:
            if p.kind == PlacementKind.RESIDENT:
                calls.append(f"pipe.{p.component}.to({self.device!r})")
            elif p.kind == PlacementKind.OFFLOADED:
                calls.append(
                    f"accelerate.cpu_offload_with_hook(pipe.{p.component}, {self.device!r})"
                )
            elif p.kind == PlacementKind.GROUPED:
                calls.append(
                    f"pipe.{p.component}.enable_group_offload({self.device!r}, "
                    f"offload_type='block_level', num_blocks_per_group=1)  # every block group"
                )
            else:
                streamed = p.layers - len(p.resident_layers)
                calls.append(
                    f"pipe.{p.component}.enable_group_offload({self.device!r}, "
                    f"offload_type='block_level', num_blocks_per_group=1)  "
                    f"# {streamed} of {p.layers} blocks streamed"
                )
        return calls
