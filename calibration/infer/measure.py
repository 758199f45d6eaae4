"""Running `dslc infer`'s sizes through the same ``Session`` (recorder, hooks) as `calibrate`.

Two sessions on two fresh pipelines from the factory: discovery (a stage per entry point) and the
ladder (the stages discovery found). Each session's first request is a warmup whose record is
dropped: it pays one-time costs that say nothing about the formula.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence

from attrs import frozen

from artifact.spelling import point_text
from calibration.errors import CalibrationError
from calibration.infer.layout import (
    StagePlan,
    Use,
    discovery_stages,
    layout,
    probe_uses,
    stage_text,
)
from calibration.infer.terms import Point
from calibration.session import Session
from runtime import Pipeline
from runtime.record import WarmupRecord

Progress = Callable[[int, int, str], None]
Factory = Callable[[int], object]


def with_stages(skeleton: str, stages: str) -> str:
    """The skeleton's text with ``stages`` inserted before its pipeline's closing brace."""
    lines = skeleton.rstrip("\n").split("\n")
    closing = max((i for i, line in enumerate(lines) if line.strip() == "}"), default=None)
    if closing is None:
        raise CalibrationError("the skeleton has no pipeline block closed by a `}` line")
    return "\n".join([*lines[:closing], "", stages, *lines[closing:]]) + "\n"


def load(text: str, name: str, what: str) -> Pipeline:
    from dslc.build import NotCompiled, load_text

    try:
        book = load_text(text, what)
    except NotCompiled as exc:
        raise CalibrationError(str(exc)) from None
    return book[name]


@frozen
class Discovered:
    stages: tuple[StagePlan, ...]
    ran: tuple[str, ...]  # every entry point that ran, in order
    records: tuple[WarmupRecord, ...]


def discover(
    factory: Factory,
    skeleton: str,
    name: str,
    base: Point,
    steps: str | None,
    *,
    seed: int,
    call_kwargs: object,
) -> Discovered:
    """Which entry points run, and which run once more with one step more."""
    from runtime.measure.diffusers_hooks import pipeline_modules

    pipe = factory(seed)
    uses: list[Use] = probe_uses(pipeline_modules(pipe))  # type: ignore[arg-type]
    formulas = load(with_stages(skeleton, discovery_stages(uses)), name, "<discovery>")
    session = Session(pipe, formulas, "cpu", seed=seed, call_kwargs=call_kwargs)  # type: ignore[arg-type]
    session.run(base)
    first = session.run(base)
    more_point = {**base, steps: int(base[steps]) + 1} if steps is not None else dict(base)
    more = session.run(more_point)
    for record in (first, more):
        if not record.ok:
            error = record.error
            raise CalibrationError(
                f"the pipeline fails at {dict(record.params)}: "
                f"{error.type if error else '?'}: {error.message if error else ''}"
            )
    plans = layout(uses, first, more)
    by_stage = {u.probe_stage: u.text for u in uses}
    ran = tuple(
        dict.fromkeys(
            by_stage[p.stage] for p in first.phases if p.kind == "component" and p.stage in by_stage
        )
    )
    return Discovered(tuple(plans), ran, (first, more))


def measuring_formulas(skeleton: str, name: str, stages: Sequence[StagePlan]) -> Pipeline:
    return load(with_stages(skeleton, "\n".join(stage_text(s) for s in stages)), name, "<ladder>")


class Runner:
    """One session over the ladder: measure sizes in order, with progress. With ``counting``,
    the recorder's clock counts work (``calibration.infer.work``): the records' seconds are work."""

    def __init__(
        self,
        factory: Factory,
        formulas: Pipeline,
        *,
        seed: int,
        call_kwargs: object,
        progress: Progress | None,
        total: int,
        counting: bool = False,
    ) -> None:
        from calibration.infer.work import WorkMeter

        pipe = factory(seed)
        self.meter = WorkMeter() if counting else None
        self.session = Session(
            pipe,  # type: ignore[arg-type]
            formulas,
            "cpu",
            seed=seed,
            call_kwargs=call_kwargs,  # type: ignore[arg-type]
            clock=self.meter.clock if self.meter is not None else "auto",
        )
        self.tick = progress or (lambda step, total, what: None)
        self.step, self.total = 0, total
        self.records: list[WarmupRecord] = []

    def _run(self, point: Mapping[str, int | bool]) -> WarmupRecord:
        with self.meter if self.meter is not None else contextlib.nullcontext():
            return self.session.run(point)

    def warm(self, point: Point) -> None:
        self._run(point)

    def measure(self, point: Mapping[str, int | bool], why: str) -> WarmupRecord:
        self.step += 1
        shown = point_text(point)
        self.tick(self.step, max(self.total, self.step), f"{shown} ({why})")
        record = self._run(point)
        self.records.append(record)
        return record
