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

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path

from attrs import field, frozen

from artifact.spelling import point_text
from calibration.errors import CalibrationError
from calibration.host import quiet_libraries, torch_threads
from calibration.probes.findings import Finding, check
from calibration.probes.minimums import BelowMinimum, below_minimums, raise_to_minimums
from calibration.probes.policy import open_stages
from calibration.probes.sizes import extra_probes, ladder, larger_probe
from calibration.probes.time_probe import TIME_TOLERANCE, time_probe
from calibration.session import Params, Session
from runtime import FormulaError, Pipeline
from runtime.estimate import DEFAULT_MARGIN, WorkloadEstimate, estimate
from runtime.record import WarmupRecord

Progress = Callable[[int, int, str], None]


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
    from dslc.compiler import compile_paths
    from dslc.diagnostics import render
    from dslc.emit import artifact, dumps
    from runtime import load_formulas

    if not formula_path.exists():
        raise CalibrationError(f"no formula file or folder {formula_path}")
    result = compile_paths([formula_path])
    if not result.ok or result.program is None:
        raise CalibrationError(
            f"{formula_path} does not compile:\n" + "\n".join(render(d) for d in result.errors)
        )
    book = load_formulas(dumps(artifact(result.program)))
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

    ``target``, ``probe`` and ``warmup`` are complete admissible points (``full_point``). Every size
    is measured once a round, ``repeat`` rounds; the sizes the first round shows are needed (a
    larger probe to confirm a fit, a probe for time) join it and every later round. With ``verify``
    each round ends with one run of the target: a shared machine's speed drifts by more than the
    time goal over minutes (bench/README.md), so the target is measured in the same stretches of
    time as the sizes that predict it. Its runs never enter the estimate; the pool is released
    after each, so the next size's reserved peak does not hold the target's cache. Time estimates
    take medians of repeats, and verification keeps the target run of median duration
    (``median_run``).
    """
    tick = progress or (lambda step, total, what: None)
    pipeline = session.formulas
    extras = extra_probes(pipeline, warmup, probe, target)
    sizes = ["probe", *(f"probe {k + 2}" for k in range(len(extras)))]
    points: dict[str, dict[str, int | bool]] = {
        "warmup": dict(warmup),
        "probe": dict(probe),
        "re-warm": dict(warmup),
    }
    points.update({f"probe {k + 2}": p for k, p in enumerate(extras)})
    per_round = len(sizes) + 1 + (1 if verify else 0)
    total = 2 + repeat * per_round  # the warmup, the rounds, the estimate
    step = 0
    roles: list[str] = []
    records: list[WarmupRecord] = []
    runs: list[WarmupRecord] = []

    def measure(role: str, why: str = "") -> None:
        nonlocal step
        step += 1
        tick(step, total, f"{role} {_describe(points[role])}" + (f" ({why})" if why else ""))
        roles.append(role)
        records.append(session.run(points[role]))

    def add_size(point: dict[str, int | bool], why: str) -> None:
        """One more size: measured now, and once in every later round."""
        nonlocal total
        role = f"probe {len(extras) + 2}"
        extras.append(point)
        points[role] = point
        sizes.append(role)
        total += repeat
        measure(role, why)

    def settle() -> tuple[tuple[Finding, ...], list[WarmupRecord], WorkloadEstimate]:
        """The findings, the records in the formulas' regime and the estimate from them."""
        found = check(pipeline, records)
        kept = in_regime(pipeline, records, found, target)
        est = estimate(
            kept, pipeline, target=target, margin=margin, component_weight_bytes=session.weights
        )
        return found, kept, est

    measure("warmup")
    for k in range(repeat):
        for role in sizes:
            measure(role)
        measure("re-warm")
        if k == 0:
            _more_sizes(pipeline, probe, target, records, settle, add_size, repeat, time_tolerance)
        if verify:
            step += 1
            tick(step, total, f"verifying at {_describe(target)} ({k + 1}/{repeat})")
            runs.append(session.run(target))
            session.recorder.backend.release_pool()
    findings, _, result = settle()
    step += 1
    tick(step, total, "estimating")
    measured_run = median_run(runs) if runs else None
    tick(total, total, "done")
    errors = tuple(
        f"{role}: {r.error.type}: {r.error.message}"
        for role, r in zip((*roles, "target"), (*records, measured_run))
        if r is not None and r.error is not None
    )
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
        roles=tuple(roles),
        records=tuple(records),
        estimate=result,
        measured=measured_run,
        target_runs=tuple(runs),
        component_weight_bytes=session.weights,
        errors=errors,
        extra_probes=tuple(extras),
        findings=findings,
        undeclared=unstaged_components(records),
        layer_bytes=session.layer_bytes,
        below_minimum=below_minimums(pipeline, {"warmup": warmup, "probe": probe}),
    )


Settle = Callable[[], tuple[tuple[Finding, ...], list[WarmupRecord], WorkloadEstimate]]


def _more_sizes(
    pipeline: Pipeline,
    probe: Params,
    target: Params,
    records: Sequence[WarmupRecord],
    settle: Settle,
    add_size: Callable[[dict[str, int | bool], str], None],
    repeat: int,
    time_tolerance: float | None,
) -> None:
    """After the first round: a larger probe when a fit is unconfirmed, then a probe for time when
    a stage's time at the target is too uncertain (``calibration.probes.time_probe``)."""
    findings, used, result = settle()
    if any(f.kind == "unconfirmed" for f in findings):
        larger = larger_probe(pipeline, probe, target, [dict(r.params) for r in records])
        if larger is not None:
            add_size(larger, "confirming a fit")
            findings, used, result = settle()
    if time_tolerance is not None:
        candidates = ladder(pipeline, probe, target)
        timed = time_probe(pipeline, used, result, target, candidates, repeat, time_tolerance)
        if timed is not None:
            add_size(timed, "pinning down time")


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
        if f.kind in ("probe-regime", "unconfirmed") and f.quantity == "memory"
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
            p.name for r in records for p in r.phases if p.kind == "component" and p.stage is None
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
) -> Calibration:
    """Build the pipeline (``pipe_factory(seed)``), wire it through its formulas, calibrate."""
    from calibration.host import resolve_device

    target_point, probe_point, warmup_point = shapes(
        pipeline, defaults, target=target, probe=probe, warmup=warmup
    )
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


def _describe(params: Mapping[str, int | bool]) -> str:
    return point_text(params)
