"""What the estimators return: frozen values that say how every figure was obtained.

A figure is never a bare number. Each one carries its ``method`` — one of ``METHODS``:

- ``"measurement"``: a record at (or, for memory, above) the target bounds it directly;
- ``"fit"``: a line ``constant + slope × measure`` through the two largest measured sizes (with a
  memory measure of several terms, a plane ``constant + Σ slope_i × term_i`` through the sizes
  nearest the target that determine it);
- ``"scaled"``: one size, scaled by the ratio of the formula's measure (target / measured);
- ``"none"``: no trustworthy figure; ``reason`` says why (the figure itself is ``None``);

and a ``reason`` in words, plus the numbers it was computed from, so a log line or a report can
show its work. Bytes are ``int`` (rounded up), seconds ``float``, measures exact (``int`` or
``Fraction``, as the formulas evaluate them).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from types import MappingProxyType

from attrs import Factory, field, frozen

from artifact.point import Point
from runtime.kinds import Method
from runtime.record import WarmupRecord

METHODS = tuple(Method)


def as_method(value: str) -> Method:
    """A method from its text; a text that names none is a ValueError naming them."""
    if value not in METHODS:
        raise ValueError(f"unknown method {value!r}; expected one of {METHODS}")
    return Method(value)


DEFAULT_MARGIN = 1.2

Measure = int | Fraction


def _frozen_params(value: Point) -> Point:
    return MappingProxyType(dict(value))


def _one_term(point: MeasuredPoint) -> tuple[Measure, ...]:
    return (point.measure,)


def _terms(value: Iterable[Measure]) -> tuple[Measure, ...]:
    return tuple(value)


@frozen
class MeasuredPoint:
    """One measured size behind a peak estimate: the stage's measure there, and what was measured.

    ``measure`` is the whole memory measure (the sum of its terms); ``terms`` its terms, one for a
    plain ``memory ~ EXPR``. What was measured is the one measured memory
    (``WarmupRecord.above_baseline``: the peak above the request's baseline), taken by ``of``
    alone; the estimate answers in absolute bytes, so the baseline is added back here, at its
    edge (``peak_bytes``).
    """

    measure: Measure
    above_bytes: int
    baseline_bytes: int
    growth_bytes: int = (
        0  # added to the measured peak by per-iteration growth (see IterationGrowth)
    )
    terms: tuple[Measure, ...] = field(
        default=Factory(_one_term, takes_self=True), converter=_terms
    )

    @classmethod
    def of(
        cls,
        record: WarmupRecord,
        peak: int,
        measure: Measure,
        terms: Iterable[Measure],
        growth_bytes: int = 0,
    ) -> MeasuredPoint:
        """A peak of ``record`` (a phase's or its own) as the estimate holds it: the one measured
        memory above the request's baseline, beside that baseline and the growth to add."""
        return cls(
            measure, record.above_baseline(peak), record.baseline_allocated, growth_bytes, terms
        )

    @property
    def peak_bytes(self) -> int:
        """The measured peak, absolute: above the baseline, plus the baseline."""
        return self.above_bytes + self.baseline_bytes

    @property
    def adjusted_peak_bytes(self) -> int:
        """The peak the estimate uses: measured, plus the growth up to the target's last
        iteration.
        """
        return self.peak_bytes + self.growth_bytes


@frozen
class LinearFit:
    """``value = constant + slope × measure`` through two measured sizes (exact)."""

    constant: Fraction
    slope: Fraction
    measures: tuple[Measure, Measure]

    def at(self, measure: Measure, margin: Fraction = Fraction(1)) -> Fraction:
        """The line at ``measure``, its linear part multiplied by ``margin``."""
        return self.constant + self.slope * measure * margin


@frozen
class PlaneFit:
    """``value = constant + Σ slope_i × term_i`` through the sizes in ``terms`` (exact).

    A term the measured sizes do not determine has slope 0: its part rides in the constant, which
    is exact at targets that do not move it (the only ones a plane fit is used for).
    """

    constant: Fraction
    slopes: tuple[Fraction, ...]
    terms: tuple[tuple[Measure, ...], ...]  # the measured sizes it passes through

    def at(self, terms: tuple[Measure, ...], margin: Fraction = Fraction(1)) -> Fraction:
        """The plane at ``terms``, its linear part multiplied by ``margin``."""
        return self.constant + margin * sum(
            (s * t for s, t in zip(self.slopes, terms)), Fraction(0)
        )


@frozen
class PeakEstimate:
    """A peak (bytes, allocator-live) at the target: the raw figure and the bound with the margin.

    ``raw_bytes`` is the estimate itself (margin 1.0); ``bound_bytes`` pads what was extrapolated
    by ``margin`` (the activation part of a scaled figure, the linear part of a fit, the growth of
    a measurement). ``margin`` is the one in force: 1.0 for a plain measurement and for none.
    """

    method: Method = field(converter=as_method)
    raw_bytes: int | None
    bound_bytes: int | None
    margin: float
    reason: str
    stage: str | None = None
    target_measure: Measure | None = None
    points: tuple[MeasuredPoint, ...] = ()
    fit: LinearFit | PlaneFit | None = None
    target_terms: tuple[Measure, ...] = ()  # the memory measure's terms at the target (2+ terms)
    #: what a weights level's floor (``level_peaks._covered``) raised the bound by over the
    #: level's own padded fit: a calibration measures nearer the target where it is large
    lift_bytes: int = 0

    def __attrs_post_init__(self) -> None:
        if (self.method == Method.NONE) != (self.raw_bytes is None):
            raise ValueError("a figure is None exactly when its method is 'none'")

    @property
    def ok(self) -> bool:
        """True when there is a figure."""
        return self.method != Method.NONE


@frozen
class PhaseEstimate:
    """One phase constraint at the target: phases measured under another component layout are
    separate.
    """

    label: str  # unique: "stage:DenoisingStage", "component:vae@DecodingStage", "...#layout2"
    kind: str
    name: str
    stage: str | None
    active_components: tuple[str, ...]
    used_components: tuple[str, ...]
    peak: PeakEstimate


@frozen
class IterationGrowth:
    """A stage whose per-iteration peaks grow with the iteration index (a KV cache), extrapolated.

    ``bytes_per_iteration`` is the mean growth over the steady iterations (the first one dropped);
    ``extrapolated_peak_bytes`` is the last measured iteration's peak carried on to the target's
    last iteration (index ``target_last_index``) of the same record's shape.
    """

    stage: str
    record_index: int
    bytes_per_iteration: Fraction
    measured_last_index: int
    measured_last_peak_bytes: int
    target_last_index: int
    extrapolated_peak_bytes: int

    @property
    def growth_bytes(self) -> int:
        """What the extrapolation adds to the measured peak."""
        return self.extrapolated_peak_bytes - self.measured_last_peak_bytes


@frozen
class StageTime:
    """One stage's duration at the target.

    A repeated stage: ``fixed_s`` (its non-iteration time, kept) plus ``per_iteration_s`` (the
    median steady iteration carried to the target's measure) × ``target_iterations``. A one-shot
    stage: its time per iteration carried to the target's measure, × ``target_iterations``.
    """

    stage: str
    method: Method = field(converter=as_method)
    seconds: float | None
    reason: str
    repeated: bool
    measured_iterations: int
    target_iterations: int
    fixed_s: float = 0.0
    per_iteration_s: float | None = None
    target_measure: Measure | None = None
    spread_s: float | None = None  # one sigma of ``seconds`` from the fit's noise; None: unknown


@frozen
class TimingEstimate:
    """The request's duration at the target: every stage plus the untracked time (kept as
    measured).
    """

    method: Method = field(converter=as_method)
    seconds: float | None
    reason: str
    stages: tuple[StageTime, ...] = ()
    untracked_s: float = 0.0
    spread_s: float | None = None  # one sigma of ``seconds``: the stages' spreads in quadrature

    def stage(self, name: str) -> StageTime:
        """The estimate of one stage."""
        for s in self.stages:
            if s.stage == name:
                return s
        raise KeyError(name)


@frozen
class LayerUseEstimate:
    """How often one layer of a layerwise component runs in one stage at the target."""

    component: str
    layer: str
    stage: str | None
    calls: int
    measured_calls: int
    method: Method = field(converter=as_method)  # MEASUREMENT (kept as measured) or SCALED
    reason: str
    measured_iterations: int | None = None
    target_iterations: int | None = None


@frozen
class WorkloadEstimate:
    """Everything estimated for one target workload of one pipeline from warmup records."""

    pipeline: str
    target: Point = field(converter=_frozen_params, hash=False)
    margin: float
    phases: tuple[PhaseEstimate, ...]
    request_peak: PeakEstimate
    timing: TimingEstimate
    layer_uses: tuple[LayerUseEstimate, ...]
    growth: tuple[IterationGrowth, ...]
    records_used: int
    records_dropped: int

    @property
    def peak_bytes(self) -> int | None:
        """The request's bound (margin applied), or None."""
        return self.request_peak.bound_bytes

    def phase(self, label: str) -> PhaseEstimate:
        """A phase estimate by its label (``"stage:DenoisingStage"``)."""
        for p in self.phases:
            if p.label == label:
                return p
        raise KeyError(f"no phase {label!r}; phases: {[p.label for p in self.phases]}")

    def layer_calls(self) -> dict[tuple[str, str], int]:
        """Estimated calls per ``(component, layer)``, summed over stages."""
        totals: dict[tuple[str, str], int] = {}
        for use in self.layer_uses:
            key = (use.component, use.layer)
            totals[key] = totals.get(key, 0) + use.calls
        return totals
