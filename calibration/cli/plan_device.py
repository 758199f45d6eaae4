"""`dslc plan`'s device options: sizes with their unit, `--device-memory cuda:N` read from the
device (torch imported only then), and the ``Device`` they describe, checked before anything runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from calibration.plan.model import DEFAULT_BANDWIDTH, DEFAULT_PAGEABLE_FACTOR, Device
from calibration.plan.report import parse_size, show_bytes
from dslc.cli_support import Failure


def size_value(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A size with its unit (`24` alone is refused: 24 bytes is rarely meant); 0 needs none."""
    if value is None:
        return None
    try:
        return parse_size(value, per_second=param.name == "bandwidth", unit_required=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def _capacity(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """--device-memory: a size, or `cuda`/`cuda:N` to read that device's total memory."""
    if value is not None and value.strip().startswith("cuda"):
        return _cuda_memory(value.strip())
    return size_value(ctx, param, value)


def capacities(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> list[int | None]:
    """Each --device-memory: one for every rank (each --calibration), or one for all."""
    return [_capacity(ctx, param, value) for value in values]


def _cuda_memory(device: str) -> int:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        raise Failure("--device-memory cuda needs torch") from None
    if not torch.cuda.is_available():
        raise click.BadParameter(
            f"no CUDA device {device!r} here; give a size (80GiB)", param_hint="--device-memory"
        )
    try:
        return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    except (RuntimeError, AssertionError, ValueError) as exc:
        raise click.BadParameter(f"{device}: {exc}", param_hint="--device-memory") from None


def device_from_options(
    capacity: int,
    reserve: int | None,
    bandwidth: int | None,
    pin_budget: int | None,
    pageable_factor: float = DEFAULT_PAGEABLE_FACTOR,
) -> Device:
    """The device the options describe; a reserve that leaves nothing usable is a usage error,
    found before any calibration runs."""
    if bandwidth == 0:
        raise click.BadParameter("must be > 0", param_hint="--bandwidth")
    if capacity == 0:
        raise click.BadParameter("must be > 0", param_hint="--device-memory")
    device = Device(
        capacity,
        reserve_bytes=reserve,
        pin_budget_bytes=pin_budget,
        bandwidth_bytes_per_s=float(bandwidth or DEFAULT_BANDWIDTH),
        pageable_factor=pageable_factor,
    )
    if device.usable_bytes <= 0:
        which = "the reserve" if reserve is not None else "the default reserve, max(1 GiB, 2 %),"
        raise click.BadParameter(
            f"{which} {show_bytes(device.reserve)} leaves nothing of {show_bytes(capacity)} "
            "(give a larger --device-memory, or a smaller --reserve)",
            param_hint="--reserve" if reserve is not None else "--device-memory",
        )
    return device
