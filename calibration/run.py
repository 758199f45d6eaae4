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

from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from pathlib import Path

from attrs import evolve, field, frozen

from artifact.spelling import point_text
from calibration.calls import UnprovenCall, unproven_calls
from calibration.errors import CalibrationError
from calibration.host import quiet_libraries, torch_threads
from calibration.offload import Offload
from calibration.probes.evidence import StageMargin, reach, stage_margins, with_risks
from calibration.probes.findings import Checked, Finding, check, rank
from calibration.probes.minimums import BelowMinimum, below_minimums, raise_to_minimums
from calibration.probes.policy import memory_terms, open_stages, work
from calibration.probes.residuals import StageFit
from calibration.probes.sizes import (
    coverage_probes,
    departures,
    extra_probes,
    ladder,
    shape_probe,
    towards,
)
from calibration.probes.time_probe import TIME_TOLERANCE, covers_memory, time_probe
from calibration.session import Params, Session
from calibration.weights import phase_weights, unobserved
from calibration.wiring import call_arguments
from runtime import FormulaError, Pipeline
from runtime.estimate import DEFAULT_MARGIN, WorkloadEstimate, estimate, estimate_timing
from runtime.estimate.fit.kinds import FindingKind, MarginSource, PhaseKind, Quantity
from runtime.record import WarmupRecord

Progress = Callable[[int, int, str], None]
MEMORY, TIME = Quantity.MEMORY, Quantity.TIME


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
class Calibration:
    """Everything one calibration produced."""

    example: str  # the built-in example, or the factory (module:function) the pipeline came from
    pipeline: str
    formula_path: str
    device: str
    backend: str
    warmup: Params = field(hash=False)
    probe: Params = field(hash=False)
    target: Params = field(hash=False)
    work_ratio: Fraction
    roles: tuple[str, ...]
    records: tuple[WarmupRecord, ...]
    estimate: WorkloadEstimate
    measured: WarmupRecord | None
    component_weight_bytes: Mapping[str, int] = field(hash=False)
    errors: tuple[str, ...] = ()
    extra_probes: tuple[Params, ...] = field(default=(), hash=False)
    findings: tuple[Finding, ...] = ()
    undeclared: tuple[str, ...] = ()  # components that ran outside every declared stage
    layer_bytes: Mapping[str, Mapping[str, int]] = field(factory=dict, hash=False)
    target_runs: tuple[WarmupRecord, ...] = ()  # every verification run (``measured``: the median)
    below_minimum: tuple[BelowMinimum, ...] = ()  # warmup or probe under a `probe X >= N`
    extra_reasons: tuple[str, ...] = ()  # why each extra probe was measured (parallel)
    extra_costs: tuple[float, ...] = ()  # each extra probe's cost, one run, over the target's
    margins: tuple[StageMargin, ...] = ()  # each stage's margin (evidence or fixed) and why
    fixed_bounds: Mapping[str, int | None] = field(factory=dict, hash=False)  # as before evidence

    @property
    def extra_cost(self) -> float:
        """The extra probes' total cost, one run each, over the target's (kept under 1)."""
        return sum(self.extra_costs)

    uncovered: tuple[str, ...] = ()  # params the target departs in that no size could move
    notices: tuple[str, ...] = ()  # warnings about the request itself (a target below the probe)
    call_warnings: tuple[str, ...] = ()  # `call` arguments a **kwargs pipeline may ignore
    phase_weights: Mapping[str, int] = field(factory=dict, hash=False)  # label -> weights at peak
    unobserved: tuple[str, ...] = ()  # components no phase saw active (planned conservatively)
    offload: str = "none"  # the placement calibrated under (``calibration.offload.Offload``)
    capacity: int | None = None  # the device's cap while calibrating
    unproven_calls: tuple[UnprovenCall, ...] = ()  # of those, the ones no measured pair showed used

    @property
    def second_probe(self) -> Params | None:
        """The first extra probe (the document's ``second_probe``), if any."""
        return self.extra_probes[0] if self.extra_probes else None

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
        raise CalibrationError(f"no formula file or folder {formula_path}")
    try:
        book = load_sources([formula_path])
    except NotCompiled as exc:
        raise CalibrationError(str(exc)) from None
    if name not in book:
        raise CalibrationError(
            f"{formula_path} has no pipeline {name!r}; it has {', '.join(sorted(book))}"
        )
    return book[name]


def full_point(pipeline: Pipeline, params: Params, what: str) -> dict[str, int | bool]:
    """The default workload with ``params``; an unknown name or inadmissible point:
    CalibrationError.
    """
    point = {**pipeline.default_workload, **params}
    try:
        pipeline.evaluate(**point)
    except FormulaError as exc:
        raise CalibrationError(f"{what}: {exc}") from None
    return point


def work_ratio(pipeline: Pipeline, probe: Params, target: Params) -> Fraction:
    """Target / probe in iterations x memory measure of the most repeated stage (tokens x steps)."""
    at_target, at_probe = pipeline.evaluate(**target), pipeline.evaluate(**probe)
    stage = max(pipeline.stages, key=lambda s: at_target[s].iterations)
    probe_work = at_probe[stage].iterations * at_probe[stage].memory
    if probe_work == 0:
        return Fraction(0)
    return Fraction(at_target[stage].iterations * at_target[stage].memory) / Fraction(probe_work)


# --- the session ----------------------------------------------------------------------------------

#: The extra sizes' total cost (iterations x memory measure of the repeated stage) stays below the
#: target's: a size is added only while the sum stays under this share of it.
BUDGET = Fraction(1)
#: How many larger sizes the loop tries to decide an ``unconfirmed`` finding.
CONFIRM_TRIES = 2


def relative_cost(pipeline: Pipeline, point: Params, target: Params) -> Fraction:
    """What one run at ``point`` costs next to the target: iterations x memory measure of the
    target's most repeated stage, at both (the work ratio's measure)."""
    ratio = work_ratio(pipeline, point, target)
    return Fraction(1) / ratio if ratio else Fraction(0)


@frozen
class Settled:
    """What the records say so far: the checks, the records to estimate from and the estimate."""

    checked: Checked
    findings: tuple[Finding, ...]
    kept: tuple[WarmupRecord, ...]
    estimate: WorkloadEstimate
    margins: tuple[StageMargin, ...]
    timed: tuple[WarmupRecord, ...] = ()  # the runs of sizes chosen for time

    @property
    def for_time(self) -> tuple[WarmupRecord, ...]:
        """Every record the time estimate used."""
        return (*self.kept, *self.timed)


def settle(
    session: Session,
    records: Sequence[WarmupRecord],
    target: Params,
    margin: float,
    uncovered: Sequence[str],
    timed: Sequence[WarmupRecord] = (),
) -> Settled:
    """Check the records, leave out the sizes a memory finding puts outside the formulas' regime,
    give each stage its margin (evidence or fixed) and estimate, with the findings' risks added.

    ``timed`` are the runs of sizes chosen for time (from measured times, so from a clock): they
    join the time checks and the time estimate only, so that no memory figure depends on a clock."""
    pipeline, backend = session.formulas, session.recorder.backend.name
    everything = check(pipeline, records, target, backend)
    kept = in_regime(pipeline, records, everything.findings, target)
    fitted = _first_request_ahead(records, kept)
    checked = everything if len(kept) == len(records) else check(pipeline, fitted, target, backend)
    if timed:
        checked = _with_time(checked, check(pipeline, [*fitted, *timed], target, backend, (TIME,)))
    regime = [f for f in everything.findings if f.kind == FindingKind.PROBE_REGIME]
    rest = (f for f in checked.findings if f.kind != FindingKind.PROBE_REGIME)
    findings = tuple(sorted([*regime, *rest], key=rank))
    margins = stage_margins(pipeline, checked, uncovered, margin)
    result = estimate(
        kept,
        pipeline,
        target=target,
        margin=margin,
        component_weight_bytes=session.weights,
        stage_margins={m.stage: m.margin for m in margins if m.source == MarginSource.EVIDENCE},
    )
    if timed:
        result = evolve(result, timing=estimate_timing([*kept, *timed], pipeline, target))
    risks = with_risks(result, (*checked.findings, *checked.quiet))
    return Settled(checked, findings, tuple(kept), risks, margins, tuple(timed))


def _first_request_ahead(
    records: Sequence[WarmupRecord], kept: Sequence[WarmupRecord]
) -> list[WarmupRecord]:
    """``kept`` with the session's first request still first: the checks never fit the first
    record (it pays one-time costs), so leaving it out of the regime must not make the next one
    (a size measured once so far) first in its place."""
    if not records or (kept and kept[0] is records[0]):
        return list(kept)
    return [records[0], *kept]


def _with_time(memory: Checked, time: Checked) -> Checked:
    """The memory checks of ``memory`` with the time checks of ``time``."""
    findings = [
        *(f for f in memory.findings if f.quantity != TIME),
        *(f for f in time.findings if f.quantity == TIME),
    ]
    fits = [*(f for f in memory.fits if f.quantity != TIME), *time.fits]
    return Checked(tuple(sorted(findings, key=rank)), tuple(fits), memory.quiet)


def fixed_margin_bounds(
    session: Session, settled: Settled, target: Params, margin: float
) -> dict[str, int | None]:
    """Each phase's bound (and the request's, as "request") with the fixed margin alone, on the
    same records: what the margins from evidence are compared with."""
    fixed = estimate(
        settled.kept,
        session.formulas,
        target=target,
        margin=margin,
        component_weight_bytes=session.weights,
    )
    bounds = {p.label: p.peak.bound_bytes for p in fixed.phases}
    bounds["request"] = fixed.request_peak.bound_bytes
    return bounds


class _Loop:
    """The runs of one calibration in order: each size by role, why it was added, its cost."""

    def __init__(
        self,
        session: Session,
        points: dict[str, dict[str, int | bool]],
        sizes: list[tuple[str, str]],
        target: Params,
        repeat: int,
        verify: bool,
        progress: Progress | None,
    ) -> None:
        self.session, self.points, self.sizes, self.target = session, points, sizes, target
        self.repeat, self.verify = repeat, verify
        self.tick = progress or (lambda step, total, what: None)
        self.total = 2 + repeat * (len(sizes) + 1 + (1 if verify else 0))
        self.step = 0
        self.roles: list[str] = []
        self.records: list[WarmupRecord] = []
        self.for_time: set[str] = set()  # roles of sizes chosen from measured times
        self.runs: list[WarmupRecord] = []
        self.cost = sum(
            (relative_cost(session.formulas, points[role], target) for role, _ in sizes[1:]),
            Fraction(0),
        )

    def measure(self, role: str, why: str = "") -> None:
        self.step += 1
        shown = f"{role} {_describe(self.points[role])}" + (f" ({why})" if why else "")
        self.tick(self.step, self.total, shown)
        self.roles.append(role)
        self.records.append(self.session.run(self.points[role]))

    def affordable(self, point: Params) -> bool:
        """Whether one more size at ``point`` keeps the extra sizes' cost under the budget."""
        return self.cost + relative_cost(self.session.formulas, point, self.target) < BUDGET

    def add_size(self, point: dict[str, int | bool], why: str, for_time: bool = False) -> bool:
        """One more size, if affordable and new: measured now, and once in every later round. A
        size ``for_time`` was chosen from measured times: it never enters a memory figure."""
        if point in self.points.values() or not self.affordable(point):
            return False
        role = f"probe {len(self.sizes) + 1}"
        if for_time:
            self.for_time.add(role)
        self.cost += relative_cost(self.session.formulas, point, self.target)
        self.points[role] = point
        self.sizes.append((role, why))
        self.total += self.repeat
        self.measure(role, why)
        return True

    def split(self) -> tuple[list[WarmupRecord], list[WarmupRecord]]:
        """The records of the sizes chosen from the formulas alone, and those chosen for time."""
        memory = [r for role, r in zip(self.roles, self.records) if role not in self.for_time]
        timed = [r for role, r in zip(self.roles, self.records) if role in self.for_time]
        return memory, timed

    def settle(self, margin: float, uncovered: Sequence[str]) -> Settled:
        """What the records say so far (``settle``), time sizes kept to time."""
        memory, timed = self.split()
        return settle(self.session, memory, self.target, margin, uncovered, timed)

    def verify_target(self, k: int) -> None:
        self.step += 1
        self.tick(
            self.step, self.total, f"verifying at {_describe(self.target)} ({k}/{self.repeat})"
        )
        self.runs.append(self.session.run(self.target))
        self.session.recorder.backend.release_pool()


def calibrate_session(
    session: Session,
    *,
    target: Params,
    probe: Params,
    warmup: Params,
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
    loop = _Loop(session, points, sizes, target, repeat, verify, progress)
    loop.measure("warmup")
    for k in range(repeat):
        for role, _ in list(loop.sizes):
            loop.measure(role)
        loop.measure("re-warm")
        if k == 0:
            _more_sizes(loop, probe, target, margin, uncovered, time_tolerance)
        if verify:
            loop.verify_target(k + 1)
    settled = loop.settle(margin, uncovered)
    loop.step += 1
    loop.tick(loop.step, loop.total, "estimating")
    measured_run = median_run(loop.runs) if loop.runs else None
    loop.tick(loop.total, loop.total, "done")
    return _calibration(
        loop, settled, measured_run, (warmup, probe, target), uncovered, label, formula_path
    )


def _planned(
    pipeline: Pipeline, warmup: Params, probe: Params, target: Params
) -> tuple[dict[str, dict[str, int | bool]], list[tuple[str, str]], tuple[str, ...]]:
    """The sizes planned before anything runs -- the probe, the extra probes that determine every
    term, one size per param no two sizes move alone -- by role, why each, and what none moves."""
    planned = [
        (p, "determining the declared terms at the target")
        for p in extra_probes(
            pipeline, warmup, probe, target, cost=lambda c: relative_cost(pipeline, c, target)
        )
    ]
    covering, uncovered = coverage_probes(
        pipeline, [warmup, probe, *(p for p, _ in planned)], [warmup, probe], probe, target
    )
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
    loop: _Loop,
    settled: Settled,
    measured_run: WarmupRecord | None,
    shapes: tuple[Params, Params, Params],
    uncovered: tuple[str, ...],
    label: str,
    formula_path: str,
) -> Calibration:
    """What the loop measured and settled, as one value; every request failing is an error."""
    session, pipeline = loop.session, loop.session.formulas
    warmup, probe, target = shapes
    errors = _errors(loop, measured_run)
    extras = [(loop.points[role], why) for role, why in loop.sizes[1:]]
    return Calibration(
        example=label,
        pipeline=pipeline.name,
        formula_path=formula_path,
        device=session.device,
        backend=session.recorder.backend.name,
        warmup=warmup,
        probe=probe,
        target=target,
        work_ratio=work_ratio(pipeline, probe, target),
        roles=tuple(loop.roles),
        records=tuple(loop.records),
        estimate=settled.estimate,
        measured=measured_run,
        target_runs=tuple(loop.runs),
        component_weight_bytes=session.weights,
        errors=errors,
        extra_probes=tuple(p for p, _ in extras),
        extra_reasons=tuple(why for _, why in extras),
        extra_costs=tuple(float(relative_cost(pipeline, p, target)) for p, _ in extras),
        findings=settled.findings,
        margins=settled.margins,
        fixed_bounds=fixed_margin_bounds(session, settled, target, settled.estimate.margin),
        uncovered=uncovered,
        undeclared=unstaged_components(loop.records),
        layer_bytes=session.layer_bytes,
        below_minimum=below_minimums(pipeline, {"warmup": warmup, "probe": probe}),
        notices=_notices(pipeline, probe, target),
        call_warnings=session.call_warnings,
        phase_weights=phase_weights(loop.records, settled.estimate.phases),
        unobserved=unobserved(loop.records, session.weights),
        offload=str(session.offload),
        capacity=session.capacity,
        unproven_calls=unproven_calls(
            pipeline,
            session.pipe,
            [r for role, r in zip(loop.roles, loop.records) if role != "warmup"] + loop.runs,
        ),
    )


def _errors(loop: _Loop, measured_run: WarmupRecord | None) -> tuple[str, ...]:
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


def _notices(pipeline: Pipeline, probe: Params, target: Params) -> tuple[str, ...]:
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


def _more_sizes(
    loop: _Loop,
    probe: Params,
    target: Params,
    margin: float,
    uncovered: Sequence[str],
    time_tolerance: float | None,
) -> None:
    """After the first round: sizes for memory (``_memory_sizes``), chosen from the formulas, the
    costs and the exact memory alone, then a probe for time (``_time_size``), chosen from measured
    times, that never enters a memory figure: two runs give the same memory bit for bit."""
    settled = _memory_sizes(loop, probe, target, margin, uncovered)
    if time_tolerance is not None:
        _time_size(loop, settled, probe, target, time_tolerance)


def _memory_sizes(
    loop: _Loop, probe: Params, target: Params, margin: float, uncovered: Sequence[str]
) -> Settled:
    """Larger sizes until no memory fit is unconfirmed and every growing stage's fit is confirmed
    by a size beyond it (for its evidence margin), then a third value of every param the memory
    grows with (``shape_probe``). Only memory findings decide: time findings come from a clock."""
    pipeline = loop.session.formulas
    settled = loop.settle(margin, uncovered)
    for _ in range(CONFIRM_TRIES):
        memory = [f for f in settled.findings if f.quantity != TIME]
        unsure = any(f.kind == FindingKind.UNCONFIRMED for f in memory)
        unconfirmed_fit = any(
            f.unconfirmed for f in settled.checked.fits if f.quantity == MEMORY
        ) and not any(f.actionable for f in memory)
        if not (unsure or unconfirmed_fit):
            break
        larger = _confirming(loop, settled, probe, target)
        why = "deciding an unconfirmed fit" if unsure else "confirming the fits"
        if larger is None or not loop.add_size(larger, why):
            break
        settled = loop.settle(margin, uncovered)
    for _ in departures(probe, target):
        found = shape_probe(pipeline, [dict(r.params) for r in loop.records], probe, target)
        if found is None or not loop.add_size(
            found[0], f"testing the fit's shape along {found[1]}"
        ):
            break
        settled = loop.settle(margin, uncovered)
    return _nearer(loop, settled, probe, target, margin, uncovered)


#: Past this reach (the target's growing part over the largest measured one) the loop measures a
#: size nearer the target: the evidence margin pads ``PER_EFOLD x ln(reach)``.
REACH = 1.1


def _nearer(
    loop: _Loop,
    settled: Settled,
    probe: Params,
    target: Params,
    margin: float,
    uncovered: Sequence[str],
) -> Settled:
    """When some growing stage's target lies past ``REACH`` its largest measured growth, the
    candidate size (``_candidates``) of most cost that the fits say brings them nearer: chosen
    from the formulas, the costs and the exact memory alone, so it serves memory and time
    without a clock."""
    fits = [f for f in settled.checked.fits if f.quantity == MEMORY and f.growing_at_target > 0]
    if max((reach(f) for f in fits), default=1.0) <= REACH:
        return settled
    pipeline = loop.session.formulas
    steps = _candidates(loop, probe, target)
    now = max(reach(f) for f in fits)
    nearer = next((c for c in reversed(steps) if _reach_with(pipeline, fits, c) < now), None)
    if nearer is None or not loop.add_size(nearer, "bringing the sizes nearer the target"):
        return settled
    return loop.settle(margin, uncovered)


def _candidates(loop: _Loop, probe: Params, target: Params) -> list[dict[str, int | bool]]:
    """The sizes the memory loop may add, cheapest first: the ladder and the halfway points,
    unmeasured, affordable, lighter than the target (``covers_memory``); from the formulas, the
    contracts and the costs alone."""
    pipeline = loop.session.formulas
    measured = [dict(r.params) for r in loop.records]
    out: list[dict[str, int | bool]] = []
    for c in [*towards(pipeline, probe, target), *ladder(pipeline, probe, target)]:
        if (
            c not in out
            and c not in measured
            and work(pipeline, probe) < work(pipeline, c) < work(pipeline, target)
            and loop.affordable(c)
            and not covers_memory(pipeline, c, target, loop.records)
        ):
            out.append(c)
    return sorted(out, key=lambda c: relative_cost(pipeline, c, target))


def _confirming(
    loop: _Loop, settled: Settled, probe: Params, target: Params
) -> dict[str, int | bool] | None:
    """The cheapest candidate size beyond every growing memory fit that no size tests yet (terms
    of its own), else the cheapest beyond the most of them, else the cheapest larger one."""
    pipeline = loop.session.formulas
    open_fits = [
        f
        for f in settled.checked.fits
        if f.quantity == MEMORY and f.growing_at_target > 0 and not f.beyond
    ]
    candidates = _candidates(loop, probe, target)

    def tested(c: Params) -> int:
        """How many of the open fits ``c`` would test: its terms are not those of a fitted size."""
        return sum(
            memory_terms(pipeline, f.stage, c) not in {f.points[i].terms for i in f.chosen}
            for f in open_fits
        )

    return max(candidates, key=tested, default=None)  # max keeps the first (cheapest) of a tie


def _reach_with(pipeline: Pipeline, fits: Sequence[StageFit], size: Params) -> float:
    """Every growing stage's reach once ``size`` is measured too (its growth from the fit)."""
    out = 1.0
    for fit in fits:
        grown = fit.growing_at(memory_terms(pipeline, fit.stage, size))
        largest = max((*fit.growing, grown), default=0.0)
        out = max(out, fit.growing_at_target / largest if largest > 0 else 1.0)
    return out


def _time_size(
    loop: _Loop, settled: Settled, probe: Params, target: Params, time_tolerance: float
) -> None:
    """A probe for time when a stage's time at the target is too uncertain
    (``calibration.probes.time_probe``): for time only."""
    pipeline = loop.session.formulas

    def candidates() -> Iterator[Params]:
        """The ladder, built only when a stage's time needs a probe (``time_probe`` asks)."""
        yield from (c for c in ladder(pipeline, probe, target) if loop.affordable(c))

    timed = time_probe(
        pipeline,
        settled.for_time,
        settled.estimate,
        target,
        candidates(),
        loop.repeat,
        time_tolerance,
    )
    if timed is not None:
        loop.add_size(timed, "pinning down time", for_time=True)


def median_run(runs: Sequence[WarmupRecord]) -> WarmupRecord:
    """The successful run of median duration (the lower middle of an even count), else the first:
    the estimators predict medians, so that is what a prediction is checked against."""
    ok = sorted((r for r in runs if r.ok), key=lambda r: r.duration_s)
    return ok[(len(ok) - 1) // 2] if ok else runs[0]


def in_regime(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    findings: Sequence[Finding],
    target: Params,
) -> list[WarmupRecord]:
    """The records to estimate from: without the sizes a memory finding puts outside the formulas'
    regime, as long as the rest still determine every term the records determined."""
    left_out = [
        dict(p)
        for f in findings
        if f.kind in (FindingKind.PROBE_REGIME, FindingKind.UNCONFIRMED) and f.quantity == MEMORY
        for p in f.out_of_regime
    ]
    kept = [r for r in records if dict(r.params) not in left_out]
    points = [dict(r.params) for r in records if r.ok]
    kept_points = [dict(r.params) for r in kept if r.ok]
    if not kept_points or set(open_stages(pipeline, kept_points, target)) - set(
        open_stages(pipeline, points, target)
    ):
        return list(records)
    return kept


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
    defaults: tuple[Params, Params, Params],
    *,
    target: Params | None = None,
    probe: Params | None = None,
    warmup: Params | None = None,
) -> tuple[dict[str, int | bool], dict[str, int | bool], dict[str, int | bool]]:
    """The target, probe and warmup: each given one over the defaults, unset params from the next
    larger (the probe's from the target, the warmup's from the probe). A default below a declared
    probe minimum (`probe frames >= 9`) is raised to it (not above the target); a size given
    below one is kept (``Calibration.below_minimum`` warns)."""
    d_warmup, d_probe, d_target = defaults
    target_point = full_point(pipeline, {**d_target, **(target or {})}, "target")
    planned_probe = raise_to_minimums(pipeline, {**target_point, **d_probe}, target_point)
    probe_point = full_point(pipeline, {**planned_probe, **(probe or {})}, "probe")
    planned_warmup = raise_to_minimums(pipeline, {**probe_point, **d_warmup}, probe_point)
    warmup_point = full_point(pipeline, {**planned_warmup, **(warmup or {})}, "warmup")
    if warmup_point == probe_point:  # no warmup size given: one step lighter along the probe axes
        from calibration.warmup import lighten

        warmup_point = lighten(pipeline, probe_point, {}) or warmup_point
    return target_point, probe_point, warmup_point


def calibrate_pipeline(
    pipe_factory: Callable[[int], object],
    pipeline: Pipeline,
    defaults: tuple[Params, Params, Params],
    *,
    target: Params | None = None,
    probe: Params | None = None,
    warmup: Params | None = None,
    call_kwargs: Callable[[int], Mapping[str, object]] | None = None,
    margin: float = DEFAULT_MARGIN,
    verify: bool = False,
    device: str = "cpu",
    seed: int = 0,
    threads: int | None = 1,
    repeat: int = 3,
    clock: str = "auto",
    progress: Progress | None = None,
    label: str = "",
    formula_path: str = "",
    time_tolerance: float | None = TIME_TOLERANCE,
    offload: Offload | None = None,
    capacity: int | None = None,
) -> Calibration:
    """Build the pipeline (``pipe_factory(seed)``), wire it through its formulas, calibrate
    (placed under ``offload`` on a device capped at ``capacity``: ``calibration.offload``)."""
    from calibration.host import resolve_device

    target_point, probe_point, warmup_point = shapes(
        pipeline, defaults, target=target, probe=probe, warmup=warmup
    )
    for point in (target_point, probe_point, warmup_point):  # before the pipeline is built
        call_arguments(pipeline, point)
    device = resolve_device(device)
    tick = progress or (lambda step, total, what: None)
    with quiet_libraries(), torch_threads(device, threads):
        tick(0, 1, "building the pipeline")
        pipe = pipe_factory(seed)
        session = Session(
            pipe,  # type: ignore[arg-type]  # any diffusers pipeline; checked by pipeline_facts
            pipeline,
            device,
            seed=seed,
            clock=clock,
            call_kwargs=call_kwargs,
            offload=offload,
            capacity=capacity,
        )
        return calibrate_session(
            session,
            target=target_point,
            probe=probe_point,
            warmup=warmup_point,
            margin=margin,
            verify=verify,
            repeat=repeat,
            progress=progress,
            label=label,
            formula_path=formula_path,
            time_tolerance=time_tolerance,
        )


def _first_line(message: str, limit: int = 300) -> str:
    """A failure's first line, shortened (torch appends a C++ stack trace to some messages)."""
    line = (message.splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit] + "..."


def _describe(params: Mapping[str, int | bool]) -> str:
    return point_text(params)
