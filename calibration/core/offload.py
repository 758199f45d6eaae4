"""How a calibration places the pipeline on its device: whole, or offloaded by diffusers itself.

A pipeline larger than its device cannot be moved onto it before the first request. Under offload
only each phase's active components are on the device, put there by diffusers' own mechanisms:

- ``model``: ``DiffusionPipeline.enable_model_cpu_offload(device=...)`` (accelerate hooks onload a
  whole component when its forward starts and offload the previous one);
- ``group``: ``diffusers.hooks.apply_group_offloading`` on every component, block level, one block
  a group (a block is onloaded for its forward and offloaded after it);
- ``none``: ``pipe.to(device)``, everything resident (the default when the weights fit the cap);
- ``auto``: ``none``; ``model`` when the pipeline's weights exceed the calibration's capacity but
  each component fits it (less an accelerator allocator's reserve); ``group`` when one alone does
  not;
- ``plan:FILE``: a saved plan (``dslc plan --json``, read by ``calibration.plan.saved``) applied
  with ``calibration.plan.apply`` (its resident components on the device, the others moved by
  its hooks), undone by ``Session.release``.

``components_moved`` names the components a placement moves on and off the device: on the CPU
(where device and host are one memory) the live-tensor backend counts their weights while loaded
(``runtime.measure.residency.Residency``), under ``group`` each group from its hooks' onload to
their offload (``calibration.placement.groups``). The mechanisms themselves are
``calibration.placement``'s. Imports torch, diffusers and accelerate when called.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING

from calibration.errors import CalibrationError
from calibration.placement.groups import count_groups
from calibration.placement.pipeline import (
    block_groups,
    offload_groups,
    offload_model,
    remove_group_offload,
    remove_model_offload,
)
from calibration.plan.model import PlacementKind
from calibration.plan.saved import SavedPlan, check_pipeline, read_plan

if TYPE_CHECKING:
    from torch import nn

    from calibration.plan.apply import Applied
    from runtime.measure import MemoryBackend
    from runtime.measure.residency import WeightsOverCapacity


class Offload(enum.Enum):
    """Which placement a calibration runs under (``--calibrate-offload``)."""

    AUTO = "auto"
    NONE = "none"
    MODEL = "model"
    GROUP = "group"
    PLAN = "plan"  # a saved plan: ``plan:FILE``, given as the ``SavedPlan`` read from it

    def __str__(self) -> str:
        return self.value


#: A placement to calibrate under: one by name, or a saved plan (``Offload.PLAN``'s file read).
Placing = Offload | SavedPlan

_UNDER: ContextVar[tuple[Placing, int | None]] = ContextVar("under", default=(Offload.AUTO, None))


def plan_path(text: str) -> str | None:
    """The FILE of ``plan:FILE`` (``""`` for ``plan:``), None for any other text."""
    kind, sep, path = text.partition(":")
    return path if sep and kind == Offload.PLAN.value else None


def placing(text: str) -> Placing:
    """``--calibrate-offload``'s value: ``plan:FILE`` read (``PlanFileError``), else by name."""
    path = plan_path(text)
    return Offload(text) if path is None else read_plan(path)


@contextlib.contextmanager
def calibrating_under(offload: Placing, capacity: int | None) -> Iterator[None]:
    """Sessions made inside that name no placement calibrate under this one (`dslc infer`, whose
    sizes run through several sessions built deep in its loop)."""
    token = _UNDER.set((offload, capacity))
    try:
        yield
    finally:
        _UNDER.reset(token)


def placement_in_force() -> tuple[Placing, int | None]:
    """The placement ``calibrating_under`` set (default: auto, no cap)."""
    return _UNDER.get()


def chosen(
    offload: Placing, weights: Mapping[str, int], capacity: int | None, reserve: int = 0
) -> Placing:
    """``auto`` resolved: none when the weights fit the capacity; else model offload when each
    component fits what the allocator's ``reserve`` leaves of it, group offload (one block on
    the device at a time) when one alone does not."""
    if offload is not Offload.AUTO:
        return offload
    if capacity is None or sum(weights.values()) <= capacity:
        return Offload.NONE
    largest = max(weights.values(), default=0)
    return Offload.GROUP if largest > capacity - reserve else Offload.MODEL


def allocator_reserve(device: str, capacity: int | None) -> int:
    """What an accelerator's caching allocator keeps of a capped device (the planner's default
    reserve); none on the CPU, whose live-tensor counter has no pool."""
    from calibration.plan.memory import allocator_margin

    if capacity is None or device.split(":")[0] == "cpu":
        return 0
    return allocator_margin(capacity)


def placed(
    pipe: object,
    offload: Placing,
    device: str,
    capacity: int | None,
    backend: MemoryBackend | None = None,
) -> tuple[MemoryBackend, Applied | None]:
    """The device's backend, capped at ``capacity``, with ``pipe`` placed on it under ``offload``
    (a given backend is used as it is: a test's, a fault injector's), and a saved plan's hooks
    (None under any other placement) to undo afterwards."""
    import torch

    from runtime.measure.backends import AllocatorBackend, LiveTensorBackend, backend_for
    from runtime.measure.diffusers_hooks import pipeline_modules

    if backend is None and capacity is not None:
        where = torch.device(device)
        capped = LiveTensorBackend if where.type == "cpu" else AllocatorBackend
        try:
            backend = capped(where, capacity=capacity)  # before the weights move: may not fit
        except ValueError as exc:
            raise CalibrationError(f"--device-capacity: {exc}") from None
    backend = backend if backend is not None else backend_for(device)
    modules = pipeline_modules(pipe)  # type: ignore[arg-type]
    applied = None
    try:
        if isinstance(offload, SavedPlan):
            applied, moved = _plan_offload(pipe, offload, device, modules)
        else:
            moved = install(pipe, offload, device, modules)
    except torch.OutOfMemoryError as exc:
        raise CalibrationError(
            f"the pipeline does not fit the device under --calibrate-offload {offload}: "
            f"{str(exc).splitlines()[0]}; use --calibrate-offload model or group"
        ) from None
    except Exception as exc:  # noqa: BLE001 - a component's move failing (any type): typed
        raise _not_placed(pipe, offload, modules, exc) from None
    if isinstance(backend, LiveTensorBackend):
        if offload is Offload.GROUP:  # counted group by group, as its hooks move them
            backend.groups = count_groups(modules, backend)
        elif isinstance(offload, SavedPlan):  # its grouped components alike
            grouped = {n for n in _grouped(offload) if n in modules}
            backend.groups = count_groups({n: modules[n] for n in grouped}, backend)
        backend.swapped = moved - {group.component for group in backend.groups}
    return backend, applied


def _not_placed(
    pipe: object, offload: Placing, modules: Mapping[str, nn.Module], exc: Exception
) -> CalibrationError:
    """Placing ``pipe`` under ``offload`` raised ``exc`` (a component's ``.to()``, a hook):
    what it installed taken off again (a saved plan's ``apply`` undid itself), the error typed."""
    left = ""
    if isinstance(offload, Offload):
        try:
            release(pipe, offload, modules)
        except Exception as undo:  # noqa: BLE001 - said in the error, never a traceback
            left = f"; taking its hooks off failed too ({type(undo).__name__}: {undo})"
    if isinstance(exc, CalibrationError):  # already typed (a plan of another pipeline): kept
        return exc if not left else CalibrationError(f"{exc}{left}")
    first = (str(exc).splitlines() or [""])[0]
    return CalibrationError(
        f"placing the pipeline under --calibrate-offload {offload} failed: "
        f"{type(exc).__name__}: {first}{left}"
    )


def install(
    pipe: object, offload: Offload, device: str, modules: Mapping[str, nn.Module]
) -> frozenset[str]:
    """Place ``pipe`` on ``device`` under ``offload``; the components it moves on and off."""
    if offload is Offload.MODEL:
        return offload_model(pipe, device, modules)
    if offload is Offload.GROUP:
        return offload_groups(device, modules)
    if offload is Offload.PLAN:
        raise CalibrationError(
            "--calibrate-offload plan needs the plan's file: plan:FILE (in Python, "
            "offload=calibration.plan.saved.read_plan(FILE))"
        )
    if device != "cpu":
        to = getattr(pipe, "to", None)
        if callable(to):
            to(device)
    return frozenset()


def _plan_offload(
    pipe: object, saved: SavedPlan, device: str, modules: Mapping[str, nn.Module]
) -> tuple[Applied, frozenset[str]]:
    """The saved plan applied (``apply`` undoes itself when it fails half-way); the components
    it moves on and off: all but the resident ones (a layerwise one whole while loaded, as
    ``Session.hand_over`` counts a plan)."""
    from calibration.plan.apply import PlanApplyError, apply
    from runtime.measure.layers import repeated_layers

    grouped = _grouped(saved)
    check_pipeline(
        saved,
        {name: len(repeated_layers(m)) for name, m in modules.items()},
        {name: block_groups(m) for name, m in modules.items() if name in grouped},
    )
    try:
        applied = apply(saved.plan, pipe, device=device, offload_device="cpu")  # type: ignore[arg-type]
    except PlanApplyError as exc:
        raise CalibrationError(f"--calibrate-offload {saved}: {exc}") from None
    moved = (p.component for p in saved.plan.placements if p.kind != PlacementKind.RESIDENT)
    return applied, frozenset(moved)


def _grouped(saved: SavedPlan) -> frozenset[str]:
    """The components a saved plan group-offloads whole."""
    return frozenset(p.component for p in saved.plan.placements if p.kind is PlacementKind.GROUPED)


def weights_over_capacity(exc: BaseException) -> WeightsOverCapacity | None:
    """The ``WeightsOverCapacity`` that ``exc`` is or was raised from, if any."""
    from runtime.measure.residency import WeightsOverCapacity

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, WeightsOverCapacity):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def unfit_message(exc: WeightsOverCapacity, offload: Offload) -> str:
    """What a calibration stops with when weights alone exceed the cap, and what to change."""
    fix = (
        "a larger --device-capacity"
        if offload is Offload.GROUP
        else "--calibrate-offload group (one block on the device at a time), or a larger "
        "--device-capacity"
    )
    return (
        f"component {exc.component} ({exc.whole} bytes of weights) cannot be calibrated under "
        f"--calibrate-offload {offload} within --device-capacity {exc.capacity} bytes: {exc}, "
        f"before any activation, so no request fits; use {fix}"
    )


def release(pipe: object, offload: Offload, modules: Mapping[str, nn.Module]) -> None:
    """Take the calibration's placement off ``pipe`` (before a plan's own is applied)."""
    if offload is Offload.MODEL:
        remove_model_offload(pipe)
    elif offload is Offload.GROUP:
        remove_group_offload(modules)
