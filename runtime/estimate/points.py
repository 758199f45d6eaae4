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
from typing import Any

from runtime.estimate.results import LinearFit, Measure
from runtime.record import WarmupRecord


def margin_fraction(margin: float | Fraction) -> Fraction:
    """The margin as an exact fraction (1.2 is 6/5); it must be a finite number >= 1."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float, Fraction)):
        raise TypeError(f"margin must be a number >= 1, got {margin!r}")
    if isinstance(margin, float) and not math.isfinite(margin):
        raise ValueError(f"margin must be a finite number >= 1, got {margin!r}")
    exact = (
        Fraction(margin).limit_denominator(1_000_000)
        if isinstance(margin, float)
        else Fraction(margin)
    )
    if exact < 1:
        raise ValueError(f"margin must be >= 1 (it pads what is extrapolated), got {margin!r}")
    return exact


def ceil_bytes(value: Fraction | int) -> int:
    """Bytes are whole and estimates round up."""
    return math.ceil(value)


def fit_line(
    small: tuple[Measure, Fraction | int], large: tuple[Measure, Fraction | int]
) -> LinearFit:
    """The line through two points ``(measure, value)`` with distinct measures."""
    (m1, v1), (m2, v2) = small, large
    slope = Fraction(v2 - v1) / Fraction(m2 - m1)
    return LinearFit(Fraction(v2) - slope * m2, slope, (m1, m2))


def show_measure(value: Measure) -> str:
    """A measure for a reason text: exact when integral, else a short decimal."""
    if isinstance(value, int) or value.denominator == 1:
        return str(int(value))
    return format(float(value), ".6g")


class Workload:
    """Records and the target, evaluated once through the pipeline's formulas."""

    def __init__(
        self,
        records: Iterable[WarmupRecord],
        pipeline: Any,
        target: Mapping[str, int | bool] | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.target = resolve_target(pipeline, target)
        self.target_values = pipeline.evaluate(**self.target)
        self.records = tuple(records)
        self.ok: list[tuple[int, WarmupRecord, dict[str, Any]]] = []
        self.blocking: list[WarmupRecord] = []
        self.dropped: list[WarmupRecord] = []
        for index, record in enumerate(self.records):
            if record.pipeline != pipeline.name:
                raise ValueError(
                    f"record {index} is of pipeline {record.pipeline!r}, not {pipeline.name!r}"
                )
            values = pipeline.evaluate(**_params(pipeline, record))
            if record.ok:
                self.ok.append((index, record, values))
            elif all(values[s].memory <= self.target_values[s].memory for s in pipeline.stages):
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


def resolve_target(pipeline: Any, target: Mapping[str, int | bool] | None) -> dict[str, int | bool]:
    """The default workload with ``target``'s overrides; an inadmissible point raises the loader's error."""
    point = dict(pipeline.default_workload)
    if target:
        point.update(target)
    pipeline.evaluate(**point)  # raises UnknownParamError / ParamTypeError / InadmissibleError
    return point


def measured_iterations(record: WarmupRecord, stage: str, values: Mapping[str, Any]) -> int:
    """How often the stage's unit ran in the record: as recorded, else the formula at its params."""
    for pair in record.stage_iterations:
        if pair.stage == stage:
            return pair.measured
    return int(values[stage].iterations)


def _params(pipeline: Any, record: WarmupRecord) -> dict[str, int | bool]:
    known = set(pipeline.default_workload)
    unknown = sorted(set(record.params) - known)
    if unknown:
        raise ValueError(f"record params {unknown} are not params of pipeline {pipeline.name!r}")
    return dict(record.params)


def _point(params: Mapping[str, int | bool]) -> str:
    return ", ".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items()
    )
