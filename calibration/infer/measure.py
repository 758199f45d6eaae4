"""Running `dslc infer`'s sizes through the same ``Session`` (recorder, hooks) as `calibrate`.

Two sessions on two fresh pipelines from the factory: discovery (a stage per entry point) and the
ladder (the stages discovery found). Each session's first request is a warmup whose record is
dropped: it pays one-time costs that say nothing about the formula.

Every request is bounded in wall-clock time (``calibration.infer.deadline``, `dslc infer
--timeout`): a timeout is raised only inside the pipeline's own code and is that size's failure;
the ladder goes on. A call that runs ``sys.exit`` is a failed request too: the record keeps
``SystemExit`` as its error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import attrs
from attrs import frozen

from artifact.limits import MAX_STAGES
from artifact.point import Point
from artifact.spelling import point_text
from calibration.core.config import RunConfig
from calibration.core.session import Session
from calibration.errors import CalibrationError
from calibration.infer.deadline import RequestTimeout, deadline
from calibration.infer.layout import (
    StagePlan,
    Use,
    discovery_stages,
    layout,
    probe_uses,
    stage_node,
)
from dslc import ast
from runtime import Pipeline
from runtime.kinds import PhaseKind
from runtime.record import WarmupRecord

Progress = Callable[[int, int, str], None]
Factory = Callable[[int], object]

#: How far from the base's steps discovery looks for a second admissible value.
STEPS_REACH = 64


def _config(seed: int) -> RunConfig:
    """How infer's sessions run: on the CPU, placed as ``calibrating_under`` says (`dslc infer
    --calibrate-offload`)."""
    return RunConfig(device="cpu", seed=seed, offload=None)


def run_request(session: Session, point: Point) -> WarmupRecord:
    """One recorded request, bounded in time; a call that times out or exits the interpreter is
    a failed request, its record holding the error."""
    before = len(session.recorder.records)
    try:
        with deadline():
            return session.run(point)
    except (SystemExit, RequestTimeout) as exc:
        if len(session.recorder.records) > before:
            return session.recorder.records[-1]
        raise CalibrationError(
            f"the request at {point_text(point)} stopped outside the pipeline's call: "
            f"{type(exc).__name__}: {exc}"
        ) from None


def skeleton_tree(skeleton: str) -> ast.Module:
    """The skeleton's syntax tree, its comments kept beside it (``dslc.fmt`` prints them)."""
    from dslc.diagnostics import CompileError
    from dslc.parse import parse_text

    try:
        return parse_text(skeleton, "<skeleton>")
    except CompileError as exc:
        raise CalibrationError(str(exc)) from None


def with_stages(skeleton: ast.Module, stages: Sequence[ast.Member]) -> ast.Module:
    """The skeleton's tree with ``stages`` after its (last) pipeline's members."""
    if not skeleton.pipelines:
        raise CalibrationError("the skeleton has no pipeline block")
    *before, last = skeleton.pipelines
    grown = attrs.evolve(last, members=(*last.members, *stages))
    return attrs.evolve(skeleton, pipelines=(*before, grown))


def printed(module: ast.Module) -> str:
    """A tree as `dslc fmt` writes it."""
    from dslc.fmt import format_module

    return format_module(module)


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

    other = _other_steps(load(skeleton, name, "the skeleton"), base, steps)  # before any run
    pipe = factory(seed)
    uses: list[Use] = probe_uses(pipeline_modules(pipe))  # type: ignore[arg-type]
    _check_uses(uses, pipe)
    formulas = load(
        printed(with_stages(skeleton_tree(skeleton), discovery_stages(uses))),
        name,
        "the skeleton with a discovery stage per component",
    )
    session = Session.open(pipe, formulas, _config(seed), call_kwargs=call_kwargs)  # type: ignore[arg-type]
    run_request(session, base)
    first = run_request(session, base)
    more = run_request(session, other) if other != base else first
    for record in (first, more):
        if not record.ok:
            error = record.error
            raise CalibrationError(
                f"the pipeline fails at {point_text(record.params)}: "
                f"{error.type if error else '?'}: {error.message if error else ''}"
            )
    fewer, greater = (
        (more, first) if steps is not None and other[steps] < base[steps] else (first, more)
    )
    plans = layout(uses, fewer, greater)
    by_stage = {u.probe_stage: u.text for u in uses}
    ran = tuple(
        dict.fromkeys(
            by_stage[p.stage]
            for p in first.phases
            if p.kind == PhaseKind.COMPONENT and p.stage in by_stage
        )
    )
    return Discovered(tuple(plans), ran, (first, more))


def _check_uses(uses: Sequence[Use], pipe: object) -> None:
    """Entry points a discovery stage can name: some, each a name the language reads, no two
    stages of one name, at most ``MAX_STAGES``."""
    from dslc.parse import KEYWORDS

    if not uses:
        held = ", ".join(map(str, getattr(pipe, "components", {}) or {})) or "nothing"
        raise CalibrationError(
            f"the pipeline has no torch module among its components (it holds {held}): infer "
            "measures the modules a call runs; does the factory build the pipeline's models?"
        )
    bad = [u.component for u in uses if not u.component.isidentifier() or u.component in KEYWORDS]
    if bad:
        raise CalibrationError(
            f"the pipeline's component {bad[0]!r} is not a name a formula file can use (a "
            "keyword or not an identifier): rename the component in the factory"
        )
    stages = [u.probe_stage for u in uses]
    twice = sorted({s for s in stages if stages.count(s) > 1})
    if twice:
        raise CalibrationError(
            f"two of the pipeline's entry points would share the discovery stage {twice[0]} "
            "(a component named like another's method, vae_decode and vae.decode): rename one"
        )
    if len(uses) > MAX_STAGES:
        raise CalibrationError(
            f"the pipeline has {len(uses)} entry points (modules, encode and decode); a formula "
            f"file holds at most {MAX_STAGES} stages"
        )


def _other_steps(formulas: Pipeline, base: Point, steps: str | None) -> Point:
    """The base with another admissible steps value, the nearest above, else below (discovery
    runs both to find the stage that runs once per step); the base itself when there is none."""
    if steps is None or formulas.params[steps].type != "int":
        return dict(base)
    value = int(base[steps])
    for v in [*range(value + 1, value + STEPS_REACH), *range(value - 1, value - STEPS_REACH, -1)]:
        point = {**base, steps: v}
        if formulas.is_admissible(**point):
            return point
    raise CalibrationError(
        f"{steps} has no admissible value within {STEPS_REACH} of the base's {steps}={value}: "
        f"infer runs two step counts to find the stage that runs once per step; widen the "
        f"range or the contract of {steps}"
    )


def measuring_formulas(skeleton: str, name: str, stages: Sequence[StagePlan]) -> Pipeline:
    tree = with_stages(skeleton_tree(skeleton), [stage_node(s) for s in stages])
    return load(printed(tree), name, "<ladder>")


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
        self.session = Session.open(
            pipe,  # type: ignore[arg-type]
            formulas,
            _config(seed),
            call_kwargs=call_kwargs,  # type: ignore[arg-type]
            clock=self.meter.clock if self.meter is not None else None,
        )
        self.tick = progress or (lambda step, total, what: None)
        self.step, self.total = 0, total
        self.records: list[WarmupRecord] = []

    def _run(self, point: Point) -> WarmupRecord:
        with self.meter if self.meter is not None else contextlib.nullcontext():
            return run_request(self.session, point)

    def warm(self, point: Point) -> None:
        self._run(point)

    def measure(self, point: Point, why: str) -> WarmupRecord:
        self.step += 1
        shown = point_text(point)
        self.tick(self.step, max(self.total, self.step), f"{shown} ({why})")
        record = self._run(point)
        self.records.append(record)
        return record
