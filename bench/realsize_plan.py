"""After a capped real-size calibration: plan for the cap and validate one request under the plan.

The lifecycle `dslc plan --validate` runs (``calibration.lifecycle.run.run_lifecycle``, mode
``apply``), given the calibration just measured: a fresh pipeline built again (the calibration's
was released), opened on the same capped device, planned for that capacity (no reserve: the CPU's
live-tensor counter has no allocator pool), the plan applied and one request at the target
measured under it. Returns the report's lines (each step, the validated phases, the verdict).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from calibration.core.config import RunConfig
from calibration.core.host import quiet_libraries, torch_threads
from calibration.core.offload import Offload
from calibration.core.session import Session
from calibration.lifecycle.render import lines
from calibration.lifecycle.run import run_lifecycle
from calibration.lifecycle.steps import Settings
from calibration.plan.model import Device
from calibration.plan.report import show_bytes

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration
    from runtime import Pipeline


def plan_and_validate(
    build: Callable[[int], object],
    formulas: Pipeline,
    cal: Calibration,
    capacity: int,
    *,
    call_kwargs: Callable[[int], Mapping[str, object]] | None = None,
    device: str = "cpu",
    threads: int | None = None,
) -> tuple[list[str], bool]:
    """The lifecycle's report lines for ``cal`` planned on a device of ``capacity`` bytes, and
    whether a plan validated."""
    gc.collect()  # the calibration's pipeline gone before the second one is built
    config = RunConfig(device=device, capacity=capacity, offload=Offload.AUTO, threads=threads)
    points = cal.shapes
    target = Device(capacity, reserve_bytes=0)
    with quiet_libraries(), torch_threads(config.device, config.threads):
        session = Session.open(build(0), formulas, config, call_kwargs=call_kwargs)  # type: ignore[arg-type]
        outcome = run_lifecycle(session, points, Settings(target, "apply"), calibration=cal)
        if outcome.applied is not None:
            outcome.applied.undo()
    header = f"mode apply; device {show_bytes(capacity)}, no reserve"
    return lines(outcome.report, header), outcome.report.validated
