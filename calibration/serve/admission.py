"""Admission: before any work, whether a request runs under the placement in force, runs under a
placement of its own, or is refused with the largest values that would be admitted
(docs/admission.md, "Admission").

``admit`` predicts every phase (``RequestPredictor``): every bound within the device's usable
bytes (capacity minus the reserve) under the placement in force -> RUN; else the planner is asked
for a placement of this request's shape (stream or offload more; plans cached per shape, bounded
LRU) -> REPLACE with that plan and its transfer; nothing fits, or the params are inadmissible ->
REFUSE with a ``RequestRefused`` naming, for each axis the request set, the largest admissible
value and the largest that fits the device; a request that moves a measure no size of the
calibration moved (``Unpredictable``) -> REFUSE, not calibrated.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from types import MappingProxyType

from attrs import define, field, frozen

from artifact.point import Point, PointKey, point_key
from artifact.spelling import point_text
from artifact.units import show_bytes
from calibration.errors import CalibrationError
from calibration.plan.model import Component, Device, Plan, PlanInputError, Target
from calibration.plan.solver import solve
from calibration.serve.phase_model import Unpredictable
from calibration.serve.predictor import RequestPrediction, RequestPredictor
from runtime import FormulaError

#: Plans kept per shape (and device) by a ``ShapePlanner``.
PLAN_CACHE = 64
#: Admissible values a search down one axis looks at, at most (then bisects them).
AXIS_VALUES = 1024


class DecisionKind(Enum):
    """What admission decided for one request."""

    RUN = "run"  # fits under the placement in force
    REPLACE = "replace"  # fits under a placement of its own, applied for it and undone after
    REFUSE = "refuse"  # fits nowhere, or is inadmissible


class RefusalReason(Enum):
    """Why a request was refused; the value is how messages and metrics spell it."""

    INADMISSIBLE = "inadmissible"
    TOO_LARGE = "too large"
    NOT_CALIBRATED = "not calibrated"  # moves a measure no size of the calibration moved


class RequestRefused(CalibrationError):
    """A request admission refused before any work: inadmissible params (``reason``
    INADMISSIBLE), a shape no placement fits on the device (TOO_LARGE), or one the calibration
    cannot predict (NOT_CALIBRATED). ``largest`` is, for
    each int axis the request set, the largest admissible value at most the one asked (the other
    params as given); ``fitting`` the largest that also fits the device (None: none found)."""

    def __init__(
        self,
        reason: RefusalReason,
        message: str,
        largest: Mapping[str, int | None],
        fitting: Mapping[str, int | None],
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.largest = MappingProxyType(dict(largest))
        self.fitting = MappingProxyType(dict(fitting))


@frozen
class Decision:
    """Admission's answer for one request."""

    kind: DecisionKind
    prediction: RequestPrediction | None  # under the placement it runs with (None: refused)
    plan: Plan | None = None  # REPLACE: this request's plan
    transfer_s: float = 0.0  # REPLACE: the plan's predicted transfer a request
    refused: RequestRefused | None = field(default=None, eq=False)


Solver = Callable[[Sequence[Component], Sequence[Target], Device], Plan]


@define
class ShapePlanner:
    """The planner asked for one request's shape (``calibration.plan.solver.solve`` by default),
    its plans kept per shape and device, the ``limit`` most recent."""

    solver: Solver = solve
    limit: int = PLAN_CACHE
    plans: OrderedDict[tuple[PointKey, Device], Plan] = field(factory=OrderedDict)
    asked: int = 0  # how often the solver ran (the cache's misses)

    def plan_for(self, predictor: RequestPredictor, params: Point, device: Device) -> Plan:
        """The least-transfer plan of ``params``'s shape alone on ``device``."""
        full = {**predictor.pipeline.default_workload, **params}
        key = (point_key(full), device)
        found = self.plans.get(key)
        if found is not None:
            self.plans.move_to_end(key)
            return found
        self.asked += 1
        plan = self.solver(predictor.components, [predictor.target(full)], device)
        self.plans[key] = plan
        while len(self.plans) > self.limit:
            self.plans.popitem(last=False)
        return plan


def admit(
    predictor: RequestPredictor,
    params: Point,
    placement_in_force: Plan | None,
    device: Device,
    planner: ShapePlanner,
) -> Decision:
    """RUN, REPLACE or REFUSE ``params`` on ``device`` (see the module docstring); nothing runs."""
    try:
        prediction = predictor.predict(params, placement_in_force)
    except FormulaError as exc:
        return _inadmissible(predictor, params, exc)
    except Unpredictable as exc:
        return _not_calibrated(params, exc)
    usable = device.usable_bytes
    if prediction.fits(usable):
        return Decision(DecisionKind.RUN, prediction)
    if _fits_somewhere(predictor, params, device, planner):
        plan = planner.plan_for(predictor, params, device)
        replaced = predictor.predict(params, plan)
        return Decision(DecisionKind.REPLACE, replaced, plan, plan.transfer_s)
    return _too_large(predictor, params, prediction, device, planner)


def _fits_somewhere(
    predictor: RequestPredictor, params: Point, device: Device, planner: ShapePlanner
) -> bool:
    """Whether a plan of this shape fits (its phases checked again by the predictor)."""
    try:
        plan = planner.plan_for(predictor, params, device)
        return plan.feasible and predictor.predict(params, plan).fits(device.usable_bytes)
    except (PlanInputError, FormulaError, Unpredictable):
        return False


def _inadmissible(predictor: RequestPredictor, params: Point, exc: FormulaError) -> Decision:
    largest = _largest_admissible(predictor, params)
    refused = RequestRefused(
        RefusalReason.INADMISSIBLE,
        f"request refused (inadmissible): {exc}" + _listed("largest admissible", largest),
        largest,
        {},
    )
    return Decision(DecisionKind.REFUSE, None, refused=refused)


def _not_calibrated(params: Point, exc: Unpredictable) -> Decision:
    message = (
        f"request refused (not calibrated): {point_text(params)} moves what no size of the "
        f"calibration moved ({exc}); calibrate again with a probe or target at these params"
    )
    refused = RequestRefused(RefusalReason.NOT_CALIBRATED, message, {}, {})
    return Decision(DecisionKind.REFUSE, None, refused=refused)


def _too_large(
    predictor: RequestPredictor,
    params: Point,
    prediction: RequestPrediction,
    device: Device,
    planner: ShapePlanner,
) -> Decision:
    largest = _largest_admissible(predictor, params)
    fitting = {name: _largest_fitting(predictor, params, name, device, planner) for name in largest}
    worst = max(prediction.phases, key=lambda p: p.activation_bytes)
    message = (
        f"request refused (too large): {point_text(params)} fits no placement on a device of "
        f"{show_bytes(device.usable_bytes)} usable ({show_bytes(device.capacity_bytes)} less a "
        f"reserve of {show_bytes(device.reserve)}): phase {worst.label} alone needs "
        f"{show_bytes(worst.activation_bytes)} beyond the weights"
        + _listed("largest that fits", fitting)
        + _listed("largest admissible", largest)
    )
    refused = RequestRefused(RefusalReason.TOO_LARGE, message, largest, fitting)
    return Decision(DecisionKind.REFUSE, prediction, refused=refused)


def _listed(what: str, values: Mapping[str, int | None]) -> str:
    shown = ", ".join(f"{name} = {'none' if v is None else v}" for name, v in values.items())
    return f"; {what} (the other params as given): {shown}" if shown else ""


def _int_axes(predictor: RequestPredictor, params: Point) -> list[str]:
    infos = predictor.pipeline.params
    return [
        n for n, v in params.items() if n in infos and infos[n].min is not None and type(v) is int
    ]


def _largest_admissible(predictor: RequestPredictor, params: Point) -> dict[str, int | None]:
    """Each int axis the request set: the largest admissible value at most the one asked."""
    out: dict[str, int | None] = {}
    pipeline = predictor.pipeline
    for name in _int_axes(predictor, params):
        others = {k: v for k, v in params.items() if k != name and k in pipeline.params}
        try:
            out[name] = pipeline.largest_admissible(name, int(params[name]), **others)
        except FormulaError:
            out[name] = None
    return out


def _largest_fitting(
    predictor: RequestPredictor, params: Point, name: str, device: Device, planner: ShapePlanner
) -> int | None:
    """The largest admissible value of ``name`` below the one asked whose shape fits some plan:
    the admissible values below it (at most ``AXIS_VALUES``), bisected (memory grows along an
    axis where the formulas do)."""
    pipeline = predictor.pipeline
    others = {k: v for k, v in params.items() if k != name and k in pipeline.params}
    values: list[int] = []
    top = int(params[name]) - 1
    while len(values) < AXIS_VALUES:
        found = pipeline.largest_admissible(name, top, **others)
        if found is None:
            break
        values.append(found)
        top = found - 1
    low, high, best = 0, len(values) - 1, None  # values descend: find the first that fits
    while low <= high:
        mid = (low + high) // 2
        if _fits_somewhere(predictor, {**others, name: values[mid]}, device, planner):
            best, high = values[mid], mid - 1
        else:
            low = mid + 1
    return best
