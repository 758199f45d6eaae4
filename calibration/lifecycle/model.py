"""The lifecycle's values: modes, how a validation ended, each step, and the report of a run.

Pure (no torch): what a serving worker decided, measured and why, as frozen values that
``calibration.lifecycle.render`` turns into JSON and terminal lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType

from attrs import field, frozen

from calibration.calibrate.verdict import STRICT_FAILED, VERIFY_FAILED
from runtime.estimate.fit.noise import CLOCK_JITTER_S, MODEL_ERROR, Z

#: A JSON-ready value (numbers, strings, lists and dicts of them) kept in a step's data.
JsonValue = object


class Mode(str, Enum):
    """How far a worker goes: measure, plan, apply and validate, or refuse to serve unvalidated."""

    OFF = "off"  # measure only: warmup, probes, estimates
    PLAN = "plan"  # ... and plan; apply nothing
    APPLY = "apply"  # ... apply and validate; serve on the fallback if nothing validates
    STRICT = "strict"  # ... and refuse to serve when no plan validates

    def __str__(self) -> str:
        return self.value


class Failure(str, Enum):
    """How a validation request ended; later members are more cautious (ranks take the max)."""

    NONE = "holds"
    TOO_SLOW = "slower"  # slower than predicted beyond the spread, and than before the plan
    OVER_BOUND = "over-bound"  # a phase measured above the bound the plan predicted
    OVER_CAPACITY = "over-capacity"  # a phase measured above capacity - reserve
    REQUEST_ERROR = "request-error"  # the request raised something other than out-of-memory
    OUT_OF_MEMORY = "out-of-memory"  # an allocation failed (CUDA, cuBLAS, the host)

    @property
    def severity(self) -> int:
        """The order ranks agree on: the largest wins."""
        return list(Failure).index(self)

    @classmethod
    def of_severity(cls, value: int) -> Failure:
        """The member at ``severity`` ``value``."""
        return list(Failure)[value]


@frozen
class PhaseCheck:
    """One phase under the plan in force: predicted (bound + weights), measured, usable bytes."""

    target: str
    label: str
    predicted_bytes: int
    measured_bytes: int | None  # None: the request never reached it
    usable_bytes: int

    @property
    def over_bound(self) -> bool:
        """Measured above what the plan predicted."""
        return self.measured_bytes is not None and self.measured_bytes > self.predicted_bytes

    @property
    def over_capacity(self) -> bool:
        """Measured above capacity - reserve."""
        return self.measured_bytes is not None and self.measured_bytes > self.usable_bytes


#: How much slower than the placement before it a placement may be (with a request slower than
#: predicted beyond the measured spread) before it is rolled back: the peer engine's 5 %.
SLOWER_THAN_BEFORE = 0.05

#: How many spreads (one sigma of the calibration's timings) past the prediction count as slower:
#: two, the verdict's band; one sigma alone flags one request in six on a loaded machine.
SPREADS = 2


def time_allowance(predicted_s: float, spread_s: float) -> float:
    """Seconds past the prediction a request may take before it is slower than predicted: two
    spreads, or the fitting core's ``Z`` sigma of the plan's own model error (a placement's hooks
    and copies add per-call work the compute fit never saw), the larger, never under the clock's
    jitter (``runtime.estimate.fit.noise``)."""
    model = Z * MODEL_ERROR * predicted_s
    return max(SPREADS * spread_s, model, Z * CLOCK_JITTER_S)


@frozen
class Baseline:
    """What the calibration measured of the request before any plan: its time at the target (the
    median of its requests there; None: none ran there) and the spread of its timings."""

    previous_s: float | None = None
    spread_s: float = 0.0
    link_bytes_per_s: float | None = None  # the link predictions are judged on (None: the plan's)
    judged: bool = True  # False: the time is recorded, not judged (the machine was what slowed)


@frozen
class SpeedCheck:
    """The validation request's time beside the plan's prediction and the time before the plan."""

    predicted_s: float | None  # None: the calibration has no compute time for the target
    measured_s: float
    spread_s: float
    previous_s: float | None

    @property
    def too_slow(self) -> bool:
        """Slower than predicted beyond ``time_allowance``, and than before by more than 5 %."""
        return (
            self.predicted_s is not None
            and self.previous_s is not None
            and self.measured_s > self.predicted_s + time_allowance(self.predicted_s, self.spread_s)
            and self.measured_s > self.previous_s * (1 + SLOWER_THAN_BEFORE)
        )


@frozen
class Validation:
    """One validation request under a plan: how it ended, why, and every phase's check."""

    failure: Failure
    reason: str
    checks: tuple[PhaseCheck, ...] = ()
    failed_stage: str | None = None  # the stage an out-of-memory error struck in
    failed_component: str | None = None  # the component whose move failed while applying
    interrupted: bool = False  # the request was interrupted (KeyboardInterrupt): stop, every rank
    speed: SpeedCheck | None = None  # the request's time (None: the request failed)

    @property
    def holds(self) -> bool:
        return self.failure is Failure.NONE


def _frozen_data(value: Mapping[str, JsonValue]) -> Mapping[str, JsonValue]:
    return MappingProxyType(dict(value))


class StepName(str, Enum):
    """The steps a lifecycle takes (the report's and the JSON's ``name``), in their usual order."""

    WARMUP = "warmup"
    PROBES = "probes"
    ESTIMATE = "estimate"
    PLAN = "plan"  # the first plan
    RANKS = "ranks"  # the ranks' agreement failed
    APPLY = "apply"
    VALIDATE = "validate"
    UNPLANNED = "unplanned"  # one request with the plan undone: did the machine slow down?
    ROLLBACK = "rollback"
    REPLAN = "re-plan"
    FALLBACK = "fallback"  # the most conservative placement
    REFUSE = "refuse"
    REWARM = "re-warm"
    SERVING = "serving"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


#: The steps that choose a placement: the last one of them says which is in force.
PLANNING = (StepName.PLAN, StepName.REPLAN, StepName.FALLBACK)


@frozen
class Step:
    """One step of the lifecycle: its name, how it ended, a line saying why, and its figures."""

    name: StepName = field(converter=StepName)
    outcome: str  # done, skipped, holds, failed, refused, ...
    detail: str
    data: Mapping[str, JsonValue] = field(factory=dict, converter=_frozen_data, hash=False)


#: Exit statuses of `dslc plan --validate` (docs/planning.md), those of
#: calibration.calibrate.verdict: 0 a plan validated (or the mode stops before validating); 1
#: nothing fits (mode plan); ``VERIFY_FAILED`` no plan validated, the worker serves on the fallback
#: unvalidated; ``STRICT_FAILED`` no plan validated and strict mode refuses to serve.
OK, NOTHING_FITS = 0, 1
NO_PLAN_VALIDATES, REFUSED = VERIFY_FAILED, STRICT_FAILED
#: A rollback that failed (hooks left on some components): not serving, in every mode.
ROLLBACK_FAILED = STRICT_FAILED


@frozen
class Report:
    """A whole run: the mode, every step in order, where each component ended, the verdict."""

    mode: Mode
    steps: tuple[Step, ...]
    validated: bool  # a plan held on a measured request
    serving: bool  # the worker went on to serve
    placement: tuple[tuple[str, str], ...]  # (component, placement text) in force; () for none
    status: int
    verdict: str
    left_in_place: tuple[tuple[str, str], ...] = ()  # (component, what) after a failed rollback

    def step(self, name: StepName | str) -> tuple[Step, ...]:
        """Every step of that name, in order."""
        return tuple(s for s in self.steps if s.name == name)
