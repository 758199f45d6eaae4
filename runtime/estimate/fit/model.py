"""The one modeler interface, after Extra-P's: a stage, a policy and the stage's samples in, one
model out. The policy says how a stage is fitted (which quantity, which memory phase and layout,
which rule selects and weighs the sizes, which candidate terms, the tolerance the measurement alone
allows); the samples are what the records say of that quantity, one value a run per size
(``samples.stage_sample``'s definitions). Calibrate's checks, the time estimate, the memory peaks
and ``dslc infer``'s term searches and time fits all fit through it.

A calibration holds one ``FitCache``: each (stage, policy, samples, target) is fitted once, and
every consumer of that fit (the findings, the evidence margins, the loop's next size, the time
estimate and the fixed-margin bounds beside it) reads the same model instead of fitting the same
records again.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Protocol, TypeVar, cast

from attrs import frozen

from artifact.point import Point, PointKey
from runtime.estimate.fit.samples import Layout
from runtime.kinds import FitRule, Quantity

M = TypeVar("M")


@frozen
class Policy:
    """How one stage is fitted: its quantity, the memory phase ``(kind, name)`` and the layout of
    its records (None: the stage's own, any), the rule that selects and weighs the sizes, and the
    residual the measurement alone can produce (memory: the backend's slack); a peak fit
    (``FitRule.PEAK``) floors its constant at ``floor`` bytes (the active components' weights),
    its phase None for the request's own peaks. A term search (``FitRule.SEARCH``) tries the
    sets of ``candidates`` (nested tiers, plainest first) of ``least`` to ``most`` terms, at most
    ``limit`` sets; a non-negative fit (``FitRule.NONNEGATIVE``) fits the one set in
    ``candidates``; both judge each size against its sample's own tolerance."""

    quantity: Quantity
    phase: tuple[str, str] | None = None
    layout: Layout | None = None
    slack: float = 0.0
    rule: FitRule = FitRule.EXACT
    floor: int = 0
    candidates: tuple[tuple[Hashable, ...], ...] = ()
    least: int = 0
    most: int = 0
    limit: int = 0


@frozen
class Sample:
    """The one sample type: one measured size of a stage's quantity, one value a run in run order;
    where it was measured is its params (a check fits each size) or its terms (the time estimate
    fits the sizes that share their terms as one); ``held_out`` sizes only check a fit, and
    ``tolerance`` is the residual the measurement alone can produce there (a search's rule).

    A stage's measured memory is one quantity everywhere: its phase's highest peak above the
    request's baseline (``samples.memory_above_baseline``); the peak estimate's ``MeasuredPoint``
    holds the same bytes and adds the baseline and growth back at its edge (it answers in absolute
    bytes)."""

    params: PointKey
    runs: tuple[float, ...]
    terms: tuple[Fraction, ...] = ()
    held_out: bool = False
    tolerance: float = 0.0

    @classmethod
    def at(
        cls, point: Point, value: float, held_out: bool = False, tolerance: float = 0.0
    ) -> Sample:
        """One run of a size, its params in their order (``dslc infer``'s samples)."""
        return cls(tuple(point.items()), (value,), (), held_out, tolerance)

    @property
    def point(self) -> dict[str, int | bool]:
        """The size's params."""
        return dict(self.params)

    @property
    def value(self) -> float:
        """The median of its runs (a one-run sample's run)."""
        return statistics.median(self.runs)


@frozen
class FitKey:
    """What a fit depends on: the stage, its policy, its samples and the target it is read at
    (``dslc infer``'s searches and time fits are read at no target: ``""`` and ``()``)."""

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
