"""The residency planner: which components stay on the device (docs/planning.md).

``model`` holds the value types, ``candidates`` each component's possible placements, ``search``
the exact branch and bound, ``solver`` the ``solve`` entry point and its explanations, ``inputs``
reads a calibration document, ``report`` shows a plan, ``apply`` installs one on a pipeline.
"""

from calibration.memory import GiB, allocator_margin
from calibration.plan.model import (
    DEFAULT_BANDWIDTH,
    Component,
    Device,
    Phase,
    PhaseUse,
    Placement,
    PlacementKind,
    Plan,
    PlanInputError,
    PlanLimitError,
    Target,
    most_cautious_device,
    most_cautious_targets,
)
from calibration.plan.solver import solve

__all__ = [
    "DEFAULT_BANDWIDTH",
    "Component",
    "Device",
    "GiB",
    "Phase",
    "PhaseUse",
    "Placement",
    "PlacementKind",
    "Plan",
    "PlanInputError",
    "PlanLimitError",
    "Target",
    "allocator_margin",
    "most_cautious_device",
    "most_cautious_targets",
    "solve",
]
