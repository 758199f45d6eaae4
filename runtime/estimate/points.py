"""Records seen through a pipeline's formulas at one target: measures, iteration counts, failures.

Every estimator starts here. ``Workload`` evaluates the formulas once per record (at the record's
params) and once at the target, and sorts the records: successful ones are the data; a failed one
whose every stage measure is at or below the target's is a *blocking* failure (the device could not
hold less than the target, so no estimate of the target is trustworthy); a failed one larger than
the target in some stage says nothing about the target and is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction

from artifact.ir import StageValues
from artifact.point import Point
from artifact.spelling import HUGE_BITS, point_text
from runtime.errors import RecordMismatchError, RuntimeValueError
from runtime.estimate.fit.samples import counted
from runtime.estimate.results import Measure
from runtime.formulas import Pipeline
from runtime.record import WarmupRecord


def margin_fraction(margin: float | Fraction) -> Fraction:
    """The margin as an exact fraction (1.2 is 6/5); it must be a finite number >= 1."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float, Fraction)):
        raise TypeError(f"margin must be a number >= 1, got {margin!r}")
    if isinstance(margin, float) and not math.isfinite(margin):
        raise RuntimeValueError(f"margin must be a finite number >= 1, got {margin!r}")
    exact = (
        Fraction(margin).limit_denominator(1_000_000)
        if isinstance(margin, float)
        else Fraction(margin)
    )
    if exact < 1:
        raise RuntimeValueError(
            f"margin must be >= 1 (it pads what is extrapolated), got {margin!r}"
        )
    return exact


def ceil_bytes(value: Fraction | int) -> int:
    """Bytes are whole and estimates round up."""
    return math.ceil(value)


def show_measure(value: Measure) -> str:
    """A measure for a reason text: exact when integral, else a short decimal; a huge one (past
    float's range or str()'s 4,300 digits) by its size."""
    whole = int(value)
    if whole >= 1 << HUGE_BITS or -whole >= 1 << HUGE_BITS:
        return f"<a number of {abs(whole).bit_length():,} bits>"
    if isinstance(value, int) or value.denominator == 1:
        return str(int(value))
    return format(float(value), ".6g")


def show_terms(terms: tuple[Measure, ...]) -> str:
    """A measure's terms for a reason text: the measure alone when it has one term."""
    if len(terms) == 1:
        return show_measure(terms[0])
    return "[" + ", ".join(show_measure(t) for t in terms) + "]"


def memory_terms(pipeline: Pipeline, params: Point) -> dict[str, tuple[Measure, ...]]:
    """Every stage's memory terms at ``params`` (one term per stage for a plain ``memory ~``)."""
    return {stage: tuple(pipeline.memory_terms(stage, **params)) for stage in pipeline.stages}


def time_terms(pipeline: Pipeline, stage: str, params: Point) -> tuple[Fraction, ...]:
    """The stage's time terms at ``params`` (one for a plain ``time ~ EXPR``), exact."""
    return tuple(Fraction(t) for t in pipeline.time_terms(stage, **params))


class Workload:
    """Records and the target, evaluated once through the pipeline's formulas."""

    def __init__(
        self,
        records: Iterable[WarmupRecord],
        pipeline: Pipeline,
        target: Point | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.target = resolve_target(pipeline, target)
        self.target_values = pipeline.evaluate(**self.target)
        self.target_terms = memory_terms(pipeline, self.target)
        self.records = tuple(records)
        self.terms: dict[int, dict[str, tuple[Measure, ...]]] = {}
        self.ok: list[tuple[int, WarmupRecord, dict[str, StageValues]]] = []
        self.blocking: list[WarmupRecord] = []
        self.dropped: list[WarmupRecord] = []
        for index, record in enumerate(self.records):
            if record.pipeline != pipeline.name:
                raise RecordMismatchError(
                    f"record {index} is of pipeline {record.pipeline!r}, not {pipeline.name!r}"
                )
            params = _params(pipeline, record)
            values = pipeline.evaluate(**params)
            terms = memory_terms(pipeline, params)
            if record.ok:
                self.ok.append((index, record, values))
                self.terms[index] = terms
            elif all(
                all(t <= g for t, g in zip(terms[s], self.target_terms[s])) for s in pipeline.stages
            ):
                self.blocking.append(record)
            else:
                self.dropped.append(record)

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(self.pipeline.stages)

    def blocking_reason(self) -> str | None:
        """Why nothing can be estimated, when a probe at or below the target failed."""
        if not self.blocking:
            return None
        failed = self.blocking[0]
        error = f"{failed.error.type}: {failed.error.message}" if failed.error else "failed"
        return (
            f"a probe at or below the target failed ({_point(failed.params)}: {error}); "
            "the device cannot hold the target as configured"
        )

    def target_iterations(self, stage: str) -> int:
        return int(self.target_values[stage].iterations)


def resolve_target(pipeline: Pipeline, target: Point | None) -> dict[str, int | bool]:
    """The default workload with ``target``'s overrides; an inadmissible point raises the loader's
    error.
    """
    point = dict(pipeline.default_workload)
    if target:
        point.update(target)
    pipeline.evaluate(**point)  # raises UnknownParamError / ParamTypeError / InadmissibleError
    return point


def measured_iterations(record: WarmupRecord, stage: str, values: Mapping[str, StageValues]) -> int:
    """How often the stage's unit ran in the record: as recorded, else the formula at its params."""
    return counted(record, stage, int(values[stage].iterations))


def _params(pipeline: Pipeline, record: WarmupRecord) -> dict[str, int | bool]:
    known = set(pipeline.default_workload)
    unknown = sorted(set(record.params) - known)
    if unknown:
        raise RecordMismatchError(
            f"record params {unknown} are not params of pipeline {pipeline.name!r}"
        )
    return dict(record.params)


def _point(params: Point) -> str:
    return point_text(params, sep=", ")
