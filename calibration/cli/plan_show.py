"""`dslc plan`'s report on the terminal: the device, the targets, the transfer, the two tables
and, with ``--explain``, each term they use in full under them."""

from __future__ import annotations

from collections.abc import Sequence

from artifact.units import show_seconds
from calibration.cli.guide import explained
from calibration.cli.plan_guide import PLAN_EXPLAINED
from calibration.plan.model import Plan, Target
from calibration.plan.report import component_rows, phase_rows, show_bytes, time_lines
from dslc.cli_support import ui


def show_plan(result: Plan, planned: Sequence[Target], explain: bool = False) -> None:
    """The plan on the terminal: the device and targets, then (when it fits) the two tables."""
    out = ui().out
    device = result.device
    out.labelled(
        "device ",
        [
            show_bytes(device.capacity_bytes),
            f"reserve {show_bytes(device.reserve)}",
            f"usable {show_bytes(device.usable_bytes)}",
            *(
                [f"host memory {show_bytes(device.host_memory_bytes)}"]
                if device.host_memory_bytes is not None
                else []
            ),
        ],
    )
    out.labelled("targets: ", [t.name for t in planned])
    if not result.feasible:
        return
    out.labelled(
        "transfer per request ",
        [
            f"{show_seconds(result.transfer_s)} ({show_bytes(result.transfer_bytes)})",
            f"pinned {show_bytes(result.pinned_bytes)}",
            f"host copies {show_bytes(result.host_bytes)}",
            *(
                [f"pageable {show_bytes(paged)} ({result.device.pageable_factor:g}x slower)"]
                if (paged := sum(p.pageable_bytes for p in result.placements))
                else []
            ),
        ],
    )
    for parts in time_lines(result):
        out.labelled("predicted ", parts)
    if not result.proven:
        out.labelled(
            "not proven the least ",
            [
                f"the search stopped at {result.stopped_by}",
                f"the least possible {show_bytes(result.lower_bound_bytes or 0)}",
            ],
        )
    out.line()
    out.table(COMPONENT_HEADERS, component_rows(result), right=COMPONENT_RIGHT)
    out.line()
    out.table(PHASE_HEADERS, phase_rows(result), right=PHASE_RIGHT)
    if explain:
        out.line()
        for line in explained(terms=PLAN_EXPLAINED):
            out.line(line)


#: The plan's tables. "activation bound" leaves the weights out (`dslc calibrate`'s "peak bound"
#: includes them); "binds" names the phase that keeps a component off the device and by how much.
COMPONENT_HEADERS = ["component", "placement", "on device", "onloaded", "transfer", "binds"]
COMPONENT_RIGHT = [False, False, True, True, True, False]
PHASE_HEADERS = ["target", "phase", "activation bound", "weights", "headroom"]
PHASE_RIGHT = [False, False, True, True, True]
