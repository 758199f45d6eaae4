"""Serving-worker adapter: per-stage `(measured, target)` iterations from a warmup batch.

It replaces the hand-written `stage.default_workload_iterations(batch, num_inference_steps)`
methods: after each warmup forward the engine records, per stage, how many iterations the probe
ran and how many the default workload would run. A record made explicitly by a loop that knows its
own length wins; a stage without a formula records nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from artifact.ir import Frozen
from runtime.errors import RuntimeValueError
from runtime.formulas import Pipeline

__all__ = [
    "DEFAULT_ATTRIBUTES",
    "BatchParams",
    "DefaultWorkloadIterations",
    "StageIterationRecorder",
    "default_workload_iterations",
]

DEFAULT_ATTRIBUTES: Mapping[str, str] = MappingProxyType(
    {"num_frames": "frames", "height": "height", "width": "width"}
)


class BatchParams(Frozen):
    """How a batch maps onto params: batch attribute -> param name, and the param `steps` feeds."""

    __slots__ = ("attributes", "steps_param")
    attributes: tuple[tuple[str, str], ...]
    steps_param: str | None

    def __init__(
        self, attributes: Mapping[str, str] = DEFAULT_ATTRIBUTES, steps_param: str | None = "steps"
    ) -> None:
        super().__init__(tuple(attributes.items()), steps_param)

    def params_for(
        self, pipeline: Pipeline, batch: object, num_inference_steps: int | None
    ) -> dict[str, object]:
        """The probe's params: attributes absent or None take defaults; params the pipeline lacks
        are skipped.
        """
        known = pipeline.params
        params: dict[str, object] = {}
        for attribute, param in self.attributes:
            if param in known:
                value = getattr(batch, attribute, None)
                if value is not None:
                    params[param] = value
        steps = self.steps_param
        if steps is not None and steps in known and num_inference_steps is not None:
            params[steps] = num_inference_steps
        return params


class DefaultWorkloadIterations(Frozen):
    """The callable a stage exposes: `(batch, num_inference_steps) -> (measured, target) | None`."""

    __slots__ = ("batch_params", "pipeline", "stage")
    pipeline: Pipeline | None
    stage: str
    batch_params: BatchParams

    @property
    def has_formula(self) -> bool:
        """Whether the pipeline declares this stage (otherwise every call answers None)."""
        return self.pipeline is not None and self.stage in self.pipeline.stages

    def __call__(self, batch: object, num_inference_steps: int | None) -> tuple[int, int] | None:
        """Iterations at the batch's shape and steps, and at the default workload; None without a
        formula.
        """
        pipeline, stage = self.pipeline, self.stage
        if pipeline is None or stage not in pipeline.stages:
            return None
        params = self.batch_params.params_for(pipeline, batch, num_inference_steps)
        return pipeline.iterations(stage, **params), pipeline.iterations(stage)  # type: ignore[arg-type]


def default_workload_iterations(
    pipeline: Pipeline | None, stage: str, batch_params: BatchParams | None = None
) -> DefaultWorkloadIterations:
    """Build the per-(pipeline, stage) callable; `pipeline` None (a model without formulas) answers
    None.
    """
    return DefaultWorkloadIterations(pipeline, stage, batch_params or BatchParams())


class StageIterationRecorder:
    """Collects `(measured, target)` per stage during warmup; explicit records are never
    overwritten.
    """

    def __init__(self, pipeline: Pipeline | None, batch_params: BatchParams | None = None) -> None:
        self._pipeline = pipeline
        self._batch_params = batch_params or BatchParams()
        self._records: dict[str, tuple[int, int]] = {}
        self._explicit: set[str] = set()

    def record_explicit(self, stage: str, measured: int, target: int) -> None:
        """A loop that knows its own length records it; this wins over any formula value."""
        for what, value in (("measured", measured), ("target", target)):
            if type(value) is not int or value < 0:
                raise RuntimeValueError(
                    f"{what} iterations of {stage!r} must be a non-negative int, got {value!r}"
                )
        self._records[stage] = (measured, target)
        self._explicit.add(stage)

    def record_from_formula(
        self, stage: str, batch: object, num_inference_steps: int | None
    ) -> tuple[int, int] | None:
        """Record the formula's pair unless the stage has an explicit record or no formula; return
        what was recorded.
        """
        if stage in self._explicit:
            return None
        pair = DefaultWorkloadIterations(self._pipeline, stage, self._batch_params)(
            batch, num_inference_steps
        )
        if pair is not None:
            self._records[stage] = pair
        return pair

    def is_explicit(self, stage: str) -> bool:
        """Whether the stage's record came from `record_explicit`."""
        return stage in self._explicit

    @property
    def records(self) -> dict[str, tuple[int, int]]:
        """A copy of every record so far, by stage name, in recording order."""
        return dict(self._records)
