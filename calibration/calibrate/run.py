"""The calibration loop behind `dslc calibrate` and bench/accuracy.py: no printing here.

record a bounded warmup, then ``repeat`` rounds of the probe, the extra probes that pin down every
declared term (memory and time) at the target (``calibration.probes.policy``) and a bounded
re-warm -- after the first round, check the sizes against the formulas
(``calibration.probes.findings``; a smallest size off the fit that nothing larger confirms yet adds
a larger size) and add a size for time when the estimate is too uncertain
(``calibration.probes.time_probe``); with ``verify`` each round ends with a run of the target,
so that it sees the same machine as the sizes -> check again, and estimate the target from
the sizes in the formulas' regime -> compare with the target's median run.

Progress is reported through a callback ``progress(step, total, what)``; the CLI draws it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path

from attrs import field, frozen

from artifact.point import Point
from artifact.spelling import path_text
from calibration.calibrate.loop import BUDGET, Loop, Progress, more_sizes, most_added
from calibration.calibrate.settle import Settled, fixed_margin_bounds, median_run
from calibration.core.calls import UnprovenCall, unproven_calls
from calibration.core.costs import relative_cost, work_ratio
from calibration.core.session import Session
from calibration.core.shapes import ExtraSize, Shapes
from calibration.core.weights import phase_weights, unobserved
from calibration.errors import CalibrationError
from calibration.plan.saved import SavedPlan
from calibration.probes.evidence import StageMargin
from calibration.probes.far import far_first
from calibration.probes.findings import Finding, rank
from calibration.probes.minimums import BelowMinimum, below_minimums, raise_to_minimums
from calibration.probes.sizes import (
    coverage_probes,
    extra_probes,
)
from calibration.probes.time_probe import TIME_TOLERANCE
from calibration.probes.under import bound_under
from runtime import FormulaError, Pipeline
from runtime.estimate import DEFAULT_MARGIN, WorkloadEstimate
from runtime.kinds import PhaseKind
from runtime.record import WarmupRecord


@frozen
class Comparison:
    """One predicted figure next to what the target run measured (None without ``verify``)."""

    label: str
    method: str
    reason: str
    predicted: float | None
    bound: float | None
    measured: float | None

    @property
    def error(self) -> float | None:
        """(predicted - measured) / measured."""
        if self.predicted is None or not self.measured:
            return None
        return (self.predicted - self.measured) / self.measured


@frozen
class UndoFailed:
    """Why the placement calibrated under could not be taken off, and what each component kept."""

    reason: str
    left_in_place: tuple[tuple[str, str], ...]


@frozen
class Calibration:
    """Everything one calibration produced."""

    example: str  # the built-in example, or the factory (module:function) the pipeline came from
    pipeline: str
    formula_path: str
    device: str
    backend: str
    shapes: Shapes  # the warmup, probe and target it ran
    work_ratio: Fraction
    roles: tuple[str, ...]
    records: tuple[WarmupRecord, ...]
    estimate: WorkloadEstimate
    measured: WarmupRecord | None
    component_weight_bytes: Mapping[str, int] = field(hash=False)
    errors: tuple[str, ...] = ()
    extras: tuple[ExtraSize, ...] = ()  # the sizes measured beyond the probe, why, and their cost
    findings: tuple[Finding, ...] = ()
    undeclared: tuple[str, ...] = ()  # components that ran outside every declared stage
    layer_bytes: Mapping[str, Mapping[str, int]] = field(factory=dict, hash=False)
    # each component's block groups under group offloading (``block_groups``), bytes in order
    group_bytes: Mapping[str, tuple[int, ...]] = field(factory=dict, hash=False)
    target_runs: tuple[WarmupRecord, ...] = ()  # every verification run (``measured``: the median)
    below_minimum: tuple[BelowMinimum, ...] = ()  # warmup or probe under a `probe X >= N`
    margins: tuple[StageMargin, ...] = ()  # each stage's margin (evidence, risk or fixed) and why
    fixed_bounds: Mapping[str, int | None] = field(factory=dict, hash=False)  # as before evidence
    uncovered: tuple[str, ...] = ()  # params the target departs in that no size could move
    notices: tuple[str, ...] = ()  # warnings about the request itself (a target below the probe)
    call_warnings: tuple[str, ...] = ()  # `call` arguments a **kwargs pipeline may ignore
    phase_weights: Mapping[str, int] = field(factory=dict, hash=False)  # label -> weights at peak
    unobserved: tuple[str, ...] = ()  # components no phase saw active (planned conservatively)
    offload: str = "none"  # the placement calibrated under (``calibration.core.offload.Offload``)
    saved_plan: SavedPlan | None = field(default=None, hash=False)  # under ``plan``
    capacity: int | None = None  # the device's cap while calibrating
    unproven_calls: tuple[UnprovenCall, ...] = ()  # of those, the ones no measured pair showed used
    undo_failed: UndoFailed | None = None  # the placement could not be taken off afterwards
    default_workload: Point = field(factory=dict, hash=False)  # the formulas': what it stands for
    kept: tuple[WarmupRecord, ...] = ()  # of ``records``, those the estimate was made from

    @property
    def extra_cost(self) -> float:
        """The extra probes' total cost, one run each, over the target's (kept under ``BUDGET``)."""
        return sum(e.cost for e in self.extras)

    @property
    def second_probe(self) -> Point | None:
        """The first extra probe (the document's ``second_probe``), if any."""
        return self.extras[0].point if self.extras else None

    def phases(self) -> list[Comparison]:
        """Per phase constraint: raw estimate, bound and (with verify) the measured peak."""
        measured = (
            _phase_peaks(self.measured) if self.measured is not None and self.measured.ok else {}
        )
        return [
            Comparison(
                p.label,
                p.peak.method,
                p.peak.reason,
                p.peak.raw_bytes,
                p.peak.bound_bytes,
                measured.get((p.kind, p.name, p.stage)),
            )
            for p in self.estimate.phases
        ]

    def request_peak(self) -> Comparison:
        peak = self.estimate.request_peak
        measured = (
            self.measured.peak_allocated if self.measured is not None and self.measured.ok else None
        )
        return Comparison(
            "request", peak.method, peak.reason, peak.raw_bytes, peak.bound_bytes, measured
        )

    def request_time(self) -> Comparison:
        """Milliseconds."""
        timing = self.estimate.timing
        seconds = timing.seconds
        measured = (
            self.measured.duration_s if self.measured is not None and self.measured.ok else None
        )
        return Comparison(
            "request",
            timing.method,
            timing.reason,
            None if seconds is None else seconds * 1e3,
            None,
            None if measured is None else measured * 1e3,
        )

    def stage_times(self) -> list[Comparison]:
        """Milliseconds per stage."""
        durations = (
            self.measured.stage_durations if self.measured is not None and self.measured.ok else {}
        )
        return [
            Comparison(
                s.stage,
                s.method,
                s.reason,
                None if s.seconds is None else s.seconds * 1e3,
                None,
                durations[s.stage] * 1e3 if s.stage in durations else None,
            )
            for s in self.estimate.timing.stages
        ]


def _phase_peaks(record: WarmupRecord) -> dict[tuple[str, str, str | None], int]:
    return {(p.kind, p.name, p.stage): p.peak_allocated for p in record.phases}


# --- formulas -------------------------------------------------------------------------------------


def load_pipeline(formula_path: Path, name: str) -> Pipeline:
    """Compile .wf files in memory and load them through the runtime, as a worker loads an artifact.

    ``formula_path`` is a file or a folder (every ``*.wf`` below it, so parents in other files
    resolve). The compiler is imported here only: calibration itself needs just the runtime.
    """
    from dslc.build import NotCompiled, load_sources

    if not formula_path.exists():
        raise CalibrationError(f"no formula file or folder {path_text(formula_path)}")
    try:
        book = load_sources([formula_path])
    except NotCompiled as exc:
        raise CalibrationError(str(exc)) from None
    if name not in book:
        raise CalibrationError(
            f"{formula_path} has no pipeline {name!r}; it has {', '.join(sorted(book))}"
        )
    return book[name]


def full_point(pipeline: Pipeline, params: Point, what: str) -> dict[str, int | bool]:
    """The default workload with ``params``; an unknown name or inadmissible point:
    CalibrationError.
    """
    point = {**pipeline.default_workload, **params}
    try:
        pipeline.evaluate(**point)
    except FormulaError as exc:
        raise CalibrationError(f"{what}: {exc}") from None
    return point


def calibrate_session(
    session: Session,
    *,
    target: Point,
    probe: Point,
    warmup: Point,
    margin: float = DEFAULT_MARGIN,
    verify: bool = False,
    repeat: int = 3,
    progress: Progress | None = None,
    label: str = "",
    formula_path: str = "",
    time_tolerance: float | None = TIME_TOLERANCE,
) -> Calibration:
    """Warmup, rounds of probes and re-warm, findings, estimate, optional verify.

    ``target``, ``probe`` and ``warmup`` are complete admissible points (``full_point``). Before
    anything runs, the sizes are planned: the probe, the extra probes that determine every declared
    term at the target, and a size for each param the target departs in that no two sizes move
    alone (``coverage_probes``). Every size is measured once a round, ``repeat`` rounds; the sizes
    the first round shows are needed (a larger size to decide an unconfirmed fit or to confirm one,
    a probe for time) join it and every later round, while the extra sizes' total cost stays under
    the target's (``BUDGET``). With ``verify`` each round ends with one run of the target: a shared
    machine's speed drifts by more than the time goal over minutes (bench/README.md), so the target
    is measured in the same stretches of time as the sizes that predict it. Its runs never enter
    the estimate; the pool is released after each. Time estimates take medians of repeats, and
    verification keeps the target run of median duration (``median_run``).
    """
    pipeline = session.formulas
    points, sizes, uncovered = _planned(pipeline, warmup, probe, target)
    added = most_added(probe, target, time_tolerance)
    loop = Loop(session, points, sizes, target, repeat, verify, progress, added)
    loop.measure("warmup")
    for k in range(repeat):
        for role, _ in list(loop.sizes):
            loop.measure(role)
        loop.measure("re-warm")
        if k == 0:
            more_sizes(loop, probe, target, margin, uncovered, time_tolerance)
        if verify:
            loop.verify_target(k + 1)
    settled = loop.settle(margin, uncovered)
    loop.step += 1
    loop.tick(loop.step, loop.total, "estimating")
    measured_run = median_run(loop.runs) if loop.runs else None
    loop.tick(loop.total, loop.total, "done")
    return _calibration(
        loop, settled, measured_run, Shapes(warmup, probe, target), uncovered, label, formula_path
    )


def _planned(
    pipeline: Pipeline, warmup: Point, probe: Point, target: Point
) -> tuple[dict[str, dict[str, int | bool]], list[tuple[str, str]], tuple[str, ...]]:
    """The sizes planned before anything runs -- the probe, the extra probes that determine every
    term, one size per param no two sizes move alone -- by role, why each, and what none moves."""

    def cost(point: Point) -> Fraction:
        return relative_cost(pipeline, point, target)

    planned = [
        (p, "determining the declared terms at the target")
        for p in extra_probes(pipeline, warmup, probe, target, cost=cost, budget=BUDGET)
    ]
    left = BUDGET - sum((cost(p) for p, _ in planned), Fraction(0))
    measured = [warmup, probe, *(p for p, _ in planned)]
    bases = [warmup, probe]
    covering, uncovered = coverage_probes(pipeline, measured, bases, probe, target, cost, left)
    # sizes serving two purposes (a far axis at the target's value, a param moved) where they fit
    both = far_first(pipeline, measured, bases, target, cost, left, covering)
    if both is not None:
        covering, uncovered = both, ()
    planned += covering
    points: dict[str, dict[str, int | bool]] = {
        "warmup": dict(warmup),
        "probe": dict(probe),
        "re-warm": dict(warmup),
    }
    sizes = [("probe", "")]
    for k, (point, why) in enumerate(planned):
        points[f"probe {k + 2}"] = point
        sizes.append((f"probe {k + 2}", why))
    return points, sizes, uncovered


def _calibration(
    loop: Loop,
    settled: Settled,
    measured_run: WarmupRecord | None,
    shapes: Shapes,
    uncovered: tuple[str, ...],
    label: str,
    formula_path: str,
) -> Calibration:
    """What the loop measured and settled, as one value; every request failing is an error."""
    session, pipeline = loop.session, loop.session.formulas
    warmup, probe, target = shapes.warmup, shapes.probe, shapes.target
    errors = _errors(loop, measured_run)
    points = loop.points
    extras = tuple(
        ExtraSize(points[role], why, float(relative_cost(pipeline, points[role], target)))
        for role, why in loop.sizes[1:]
    )
    return Calibration(
        example=label,
        pipeline=pipeline.name,
        formula_path=formula_path,
        device=session.device,
        backend=session.recorder.backend.name,
        shapes=shapes,
        work_ratio=work_ratio(pipeline, probe, target),
        roles=tuple(loop.roles),
        records=tuple(loop.records),
        estimate=settled.estimate,
        kept=settled.kept,
        measured=measured_run,
        target_runs=tuple(loop.runs),
        component_weight_bytes=session.weights,
        errors=errors,
        extras=extras,
        findings=_with_under(pipeline, settled, measured_run, target),
        margins=settled.margins,
        fixed_bounds=fixed_margin_bounds(
            session, settled, target, settled.estimate.margin, loop.modeler
        ),
        uncovered=uncovered,
        undeclared=unstaged_components(loop.records),
        layer_bytes=session.layer_bytes,
        group_bytes=session.group_bytes,
        below_minimum=below_minimums(pipeline, {"warmup": warmup, "probe": probe}),
        notices=_notices(pipeline, probe, target),
        call_warnings=session.call_warnings,
        phase_weights=phase_weights(loop.records, settled.estimate.phases),
        unobserved=unobserved(loop.records, session.weights),
        offload=str(session.offload),
        saved_plan=session.saved_plan,
        capacity=session.capacity,
        default_workload=pipeline.default_workload,
        unproven_calls=unproven_calls(
            pipeline,
            session.pipe,
            [r for role, r in zip(loop.roles, loop.records) if role != "warmup"] + loop.runs,
        ),
    )


def _with_under(
    pipeline: Pipeline, settled: Settled, measured_run: WarmupRecord | None, target: Point
) -> tuple[Finding, ...]:
    """The settled findings and, where a bound is under the verified peak, the finding naming it."""
    fits = settled.checked.fits
    under = bound_under(pipeline, settled.estimate, fits, measured_run, target)
    return tuple(sorted([*settled.findings, *under], key=rank))


def _errors(loop: Loop, measured_run: WarmupRecord | None) -> tuple[str, ...]:
    """Each failed request, by role; ``CalibrationError`` when every request failed."""
    errors = tuple(
        f"{role}: {r.error.type}: {r.error.message}"
        for role, r in zip((*loop.roles, "target"), (*loop.records, measured_run))
        if r is not None and r.error is not None
    )
    if not any(r.ok for r in (*loop.records, *loop.runs)):
        raise CalibrationError(
            f"every request failed ({len(loop.records) + len(loop.runs)} of them); the first: "
            f"{_first_line(errors[0]) if errors else 'unknown'}"
        )
    return errors


def _notices(pipeline: Pipeline, probe: Point, target: Point) -> tuple[str, ...]:
    """Warnings about the request itself: a target no larger than the probe measures nothing new."""
    ratio = work_ratio(pipeline, probe, target)
    if ratio and ratio < 1:
        notice = (
            f"the target is {float(ratio):.3g}x the probe: smaller than the probe, so nothing is "
            "extrapolated and the calibration says little about larger requests; give a larger "
            "--target (or a smaller --probe)"
        )
        return (notice,)
    return ()


def unstaged_components(records: Sequence[WarmupRecord]) -> tuple[str, ...]:
    """Components that ran outside every stage (their formulas declare no `uses` for them)."""
    return tuple(
        dict.fromkeys(
            p.name
            for r in records
            for p in r.phases
            if p.kind == PhaseKind.COMPONENT and p.stage is None
        )
    )


def shapes(
    pipeline: Pipeline,
    defaults: Shapes,
    *,
    target: Point | None = None,
    probe: Point | None = None,
    warmup: Point | None = None,
) -> Shapes:
    """The warmup, probe and target, complete: each given one over the defaults, unset params from
    the next larger (the probe's from the target, the warmup's from the probe). A default below a
    declared probe minimum (`probe frames >= 9`) is raised to it (not above the target); a size
    given below one is kept (``Calibration.below_minimum`` warns)."""
    d_warmup, d_probe, d_target = defaults.warmup, defaults.probe, defaults.target
    target_point = full_point(pipeline, {**d_target, **(target or {})}, "target")
    planned_probe = raise_to_minimums(pipeline, {**target_point, **d_probe}, target_point)
    probe_point = full_point(pipeline, {**planned_probe, **(probe or {})}, "probe")
    planned_warmup = raise_to_minimums(pipeline, {**probe_point, **d_warmup}, probe_point)
    warmup_point = full_point(pipeline, {**planned_warmup, **(warmup or {})}, "warmup")
    if warmup_point == probe_point:  # no warmup size given: one step lighter along the probe axes
        from calibration.calibrate.warmup import lighten

        warmup_point = lighten(pipeline, probe_point, {}) or warmup_point
    return Shapes(warmup_point, probe_point, target_point)


def _first_line(message: str, limit: int = 300) -> str:
    """A failure's first line, shortened (torch appends a C++ stack trace to some messages)."""
    line = (message.splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit] + "..."
