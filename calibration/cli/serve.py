"""`dslc serve`: the HTTP worker (docs/serving.md) over an example, ``--pipeline`` or a local
diffusers folder's factory. At start it runs the lifecycle (calibrate, plan, apply, validate; warm
from ``--state`` when nothing changed), then serves with uvicorn until SIGTERM or Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import click

from calibration.cli.offload_option import size_option
from calibration.cli.options import (
    Choice,
    check_choice,
    device_option,
    packed,
    pipeline_options,
    run_options,
    shape_option,
)
from calibration.core.config import RunConfig
from calibration.core.shapes import Shapes
from dslc.cli_support import POINT_METAVAR, Failure
from dslc.cli_values import FiniteRange

if TYPE_CHECKING:
    from calibration.plan.model import Device

EXTRA = "dslc serve needs the [serve] extra: pip install 'workload-formulas[serve]'"


@click.command("serve", short_help="Serve a pipeline over HTTP, every request planned.")
@pipeline_options
@click.option(
    "--target",
    multiple=True,
    callback=shape_option,
    metavar=POINT_METAVAR,
    help="The largest serving shape: calibrated, planned and validated at start "
    "[default: the example's demo target].",
)
@run_options
@device_option
@click.option(
    "--reserve",
    callback=size_option,
    metavar="SIZE",
    help="Kept free below --device-capacity [default: max(1 GiB, 2 %)].",
)
@click.option(
    "--state",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="The state folder: a restart with the same fingerprint skips the probes.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option(
    "--queue",
    type=click.IntRange(1, 10_000),
    default=8,
    show_default=True,
    help="Requests waiting at most; beyond: 429.",
)
@click.option(
    "--request-timeout",
    type=FiniteRange(0, 86400, min_open=True),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="A request not answered in this time: 504.",
)
@click.option("--json", "as_json", is_flag=True, help="The worker's log as JSON lines on stderr.")
@packed
def serve(
    choice: Choice,
    warmup: dict[str, int | bool],
    probe: dict[str, int | bool],
    target: dict[str, int | bool],
    config: RunConfig,
    reserve: int | None,
    state: Path | None,
    host: str,
    port: int,
    queue: int,
    request_timeout: float,
    as_json: bool,
) -> None:
    """Serve a diffusers pipeline over HTTP: POST /v1/images/generations, GET /healthz, /metrics.

    The worker calibrates the --target (the largest serving shape), plans for --device-capacity
    (on CUDA: the device's memory when not given), applies the plan and validates it on one
    measured request before /healthz says ready.
    """
    choice = check_choice(choice)  # usage errors before torch, fastapi and uvicorn load
    device = _device(config, reserve)
    try:
        import uvicorn

        from calibration.serve.app import AppSettings, create_app
    except ImportError:
        raise Failure(EXTRA) from None
    from calibration.cli.serve_boot import Boot, boot

    _log_to_stderr(as_json)
    # measured on the device as it is, planned for the capacity (as `dslc plan --validate`)
    measured = attrs.evolve(config, capacity=_whole_device(config.device))
    given = Boot(choice, Shapes(warmup, probe, target), measured, device, state)
    app = create_app(lambda: boot(given), AppSettings(queue, request_timeout))
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info"))
    with _stopped_by_signal():
        server.run()


class _JsonLines(logging.Formatter):
    """One JSON object a record: time, level, logger, message (for a log collector)."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(
            {
                "time": record.created,
                "level": record.levelname,
                "logger": record.name,
                "message": record.getMessage(),
            }
        )


def _log_to_stderr(as_json: bool = False) -> None:
    """The worker's own log (requests, drift, shutdown) beside uvicorn's, on stderr: as text, or
    as JSON lines (``--json``)."""
    handler = logging.StreamHandler()
    text = logging.Formatter("%(levelname)s:     %(name)s: %(message)s")
    handler.setFormatter(_JsonLines() if as_json else text)
    for name in ("calibration.serve", "calibration.cli.serve"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)


@contextlib.contextmanager
def _stopped_by_signal() -> Iterator[None]:
    """SIGTERM and Ctrl-C end a graceful shutdown with exit 0: uvicorn drains, then raises the
    signal it caught again once its own handlers are off; here that signal finds a handler that
    only notes it, so the process exits 0 instead of dying by the signal."""
    caught: list[int] = []
    handled = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.signal(sig, lambda sig, _frame: caught.append(sig)) for sig in handled}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _whole_device(device: str) -> int | None:
    """A CUDA device's own memory (the calibration's cap there, so that ``auto`` offloads a
    pipeline larger than the card); None on the CPU, which a calibration never fills.

    --device-capacity is the capacity planned for, never the calibration's cap: under a cap
    below the pipeline's weights ``auto`` calibrates under model offload, which cannot hold a
    target that a streaming plan serves, and no phase then has an estimate to plan from."""
    if not device.startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)


def _device(config: RunConfig, reserve: int | None) -> Device:
    """The device planned for: --device-capacity, or a CUDA device's own memory."""
    from calibration.plan.model import Device

    capacity = config.capacity if config.capacity is not None else _whole_device(config.device)
    if capacity is None:
        raise click.UsageError("give --device-capacity: the memory the worker plans for (24GiB)")
    device = Device(capacity, reserve_bytes=reserve)
    if device.usable_bytes <= 0:
        raise click.BadParameter(
            f"the reserve leaves nothing of {capacity} bytes (give a smaller --reserve)",
            param_hint="--reserve",
        )
    return device
