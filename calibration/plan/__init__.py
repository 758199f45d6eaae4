"""The residency planner: which components stay on the device (docs/planning.md).

``model`` holds the value types, ``candidates`` each component's possible placements, ``search``
the exact branch and bound, ``greedy`` its fallback when stopped, ``solver`` the ``solve`` entry
point, ``answer`` the plan of a pick (each phase's headroom, each placement and why), ``timing``
the predicted request time, ``ranks`` plans for ranks of different devices, ``inputs`` reads a
calibration document, ``report`` shows a plan, ``apply`` installs one on a pipeline.
"""

from calibration.plan.memory import GiB, allocator_margin
from calibration.plan.model import (
    DEFAULT_BANDWIDTH,
    DEFAULT_PAGEABLE_FACTOR,
    Component,
    Device,
    Phase,
    PhaseUse,
    Placement,
    PlacementKind,
    Plan,
    PlanInputError,
    PlanLimitError,
    Shortfall,
    Target,
    TimePrediction,
    most_cautious_device,
    most_cautious_targets,
)
from calibration.plan.ranks import Agreement, RankInputs, RankPlans, solve_ranks
from calibration.plan.solver import solve

__all__ = [
    "DEFAULT_BANDWIDTH",
    "DEFAULT_PAGEABLE_FACTOR",
    "Agreement",
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
    "RankInputs",
    "RankPlans",
    "Shortfall",
    "Target",
    "TimePrediction",
    "allocator_margin",
    "most_cautious_device",
    "most_cautious_targets",
    "solve",
    "solve_ranks",
]
