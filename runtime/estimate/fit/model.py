"""The one modeler interface, after Extra-P's: a stage, a policy and the stage's samples in, one
model out. The policy says how a stage is fitted (which quantity, which memory phase and layout,
which rule selects and weighs the sizes, the tolerance the measurement alone allows); the samples
are what the records say of that quantity, one value a run per size (``samples.stage_sample``'s
definitions).

A calibration holds one ``FitCache``: each (stage, policy, samples, target) is fitted once, and
every consumer of that fit (the findings, the evidence margins, the loop's next size, the time
estimate and the fixed-margin bounds beside it) reads the same model instead of fitting the same
records again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Protocol, TypeVar, cast

from attrs import frozen

from artifact.point import PointKey
from runtime.estimate.fit.samples import Layout
from runtime.kinds import FitRule, Quantity

M = TypeVar("M")


@frozen
class Policy:
    """How one stage is fitted: its quantity, the memory phase ``(kind, name)`` and the layout of
    its records (None: the stage's own, any), the rule that selects and weighs the sizes, and the
    residual the measurement alone can produce (memory: the backend's slack); a peak fit
    (``FitRule.PEAK``) floors its constant at ``floor`` bytes (the active components' weights),
    its phase None for the request's own peaks."""

    quantity: Quantity
    phase: tuple[str, str] | None = None
    layout: Layout | None = None
    slack: float = 0.0
    rule: FitRule = FitRule.EXACT
    floor: int = 0


@frozen
class Sample:
    """One measured size of a stage's quantity, one value a run in run order; where it was measured
    is its params (a check fits each size) or its terms (the time estimate fits the sizes that
    share their terms as one)."""

    params: PointKey
    runs: tuple[float, ...]
    terms: tuple[Fraction, ...] = ()


@frozen
class FitKey:
    """What a fit depends on: the stage, its policy, its samples and the target it is read at."""

    stage: str
    policy: Policy
    samples: tuple[Sample, ...]
    target: PointKey


class Modeler(Protocol):
    """Fits a stage under a policy: ``model`` builds the model from the key alone."""

    def fit(self, key: FitKey, model: Callable[[FitKey], M]) -> M: ...


class FitCache:
    """A modeler that fits each key once and hands every later reader the same model; ``fitted``
    counts the fits per key (1 each), ``reads`` every request for one."""

    def __init__(self) -> None:
        self._models: dict[FitKey, object] = {}
        self.fitted: Counter[FitKey] = Counter()
        self.reads = 0

    def fit(self, key: FitKey, model: Callable[[FitKey], M]) -> M:
        self.reads += 1
        if key not in self._models:
            self.fitted[key] += 1
            self._models[key] = model(key)
        return cast(M, self._models[key])


class Refit:
    """A modeler that fits on every request: for a single check outside a calibration."""

    def fit(self, key: FitKey, model: Callable[[FitKey], M]) -> M:
        return model(key)
