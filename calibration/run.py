"""The calibration session behind `dslc calibrate` (and bench/accuracy.py): no printing here.

compile the example's formula file in memory -> load it like an artifact -> build the tiny diffusers
pipeline -> record a bounded warmup, the probe (and a second probe when the warmup and the probe
leave a stage's memory terms open at the target) and a bounded re-warm -> estimate the target ->
optionally run the target for real (``verify``) and compare.

Progress is reported through a callback ``progress(step, total, what)``; the CLI draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

from attrs import field, frozen

from calibration.examples import Example, Params
from calibration.session import (
    CalibrateError,
    Session,
    quiet_libraries,
    resolve_device,
    torch_threads,
)
from runtime.estimate import WorkloadEstimate, estimate, undetermined_stages
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

    example: str
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
    second_probe: Params | None = field(default=None, hash=False)

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


def load_pipeline(formula_path: Path, name: str) -> Any:
    """Compile one .wf file in memory and load it through the runtime, as a worker loads an
    artifact.
    """
    from dslc.compiler import compile_paths
    from dslc.diagnostics import render
    from dslc.emit import artifact, dumps
    from runtime import load_formulas

    if not formula_path.is_file():
        raise CalibrateError(f"no formula file {formula_path}")
    result = compile_paths([formula_path])
    if not result.ok or result.program is None:
        raise CalibrateError(
            f"{formula_path} does not compile:\n" + "\n".join(render(d) for d in result.errors)
        )
    book = load_formulas(dumps(artifact(result.program)))
    if name not in book:
        raise CalibrateError(f"{formula_path} has no pipeline {name!r}; it has {', '.join(book)}")
    return book[name]


def full_point(pipeline: Any, params: Params, what: str) -> dict[str, int | bool]:
    """The default workload with ``params``; an unknown name or an inadmissible point is a
    CalibrateError.
    """
    from runtime import FormulaError

    point = {**pipeline.default_workload, **params}
    try:
        pipeline.evaluate(**point)
    except FormulaError as exc:
        raise CalibrateError(f"{what}: {exc}") from None
    return point


def work_ratio(pipeline: Any, probe: Params, target: Params) -> Fraction:
    """Target / probe in iterations x memory measure of the most repeated stage (tokens x steps
    for Wan).
    """
    at_target, at_probe = pipeline.evaluate(**target), pipeline.evaluate(**probe)
    stage = max(pipeline.stages, key=lambda s: at_target[s].iterations)
    probe_work = at_probe[stage].iterations * at_probe[stage].memory
    if probe_work == 0:
        return Fraction(0)
    return Fraction(at_target[stage].iterations * at_target[stage].memory) / Fraction(probe_work)


# --- the session ----------------------------------------------------------------------------------


def calibrate_example(
    example: Example,
    formulas_dir: Path,
    *,
    warmup: Params | None = None,
    probe: Params | None = None,
    target: Params | None = None,
    margin: float = 1.2,
    verify: bool = False,
    device: str = "cpu",
    seed: int = 0,
    threads: int | None = 1,
    repeat: int = 3,
    clock: str = "auto",
    progress: Progress | None = None,
) -> Calibration:
    """Warmup, the probe and the re-warm (each ``repeat`` times); estimate the target; with
    ``verify`` run the target (``repeat`` times) for real.

    Timings on a shared machine are noisy: the estimators keep the fastest run of each size, and the
    verified target is the fastest of ``repeat`` runs (memory peaks do not depend on the run).
    """
    tick = progress or (lambda step, total, what: None)
    tick(0, 3 + 2 * repeat, f"compiling {example.formula_file}")
    formula_path = formulas_dir / example.formula_file
    pipeline = load_pipeline(formula_path, example.pipeline)
    target_point = full_point(pipeline, {**example.target, **(target or {})}, "target")
    probe_point = full_point(pipeline, {**target_point, **example.probe, **(probe or {})}, "probe")
    warmup_point = full_point(
        pipeline, {**probe_point, **example.warmup, **(warmup or {})}, "warmup"
    )
    second = second_probe(pipeline, warmup_point, probe_point, target_point)
    # the sizes alternate, so load drift on a shared machine hits them all alike
    rounds = ["probe", *(["second probe"] if second else []), "re-warm"]
    roles = ("warmup", *(rounds * repeat))
    total = 3 + len(roles) + (repeat if verify else 0)
    device = resolve_device(device)
    with quiet_libraries(), torch_threads(device, threads):
        tick(1, total, f"building the tiny {example.name} pipeline")
        session = Session(example, pipeline, device, seed, clock)
        points = {"warmup": warmup_point, "probe": probe_point, "re-warm": warmup_point}
        if second:
            points["second probe"] = second
        records = []
        for step, role in enumerate(roles, start=2):
            tick(step, total, f"{role} {_describe(points[role])}")
            records.append(session.run(points[role]))
        step += 1
        tick(step, total, "estimating")
        result = estimate(
            records,
            pipeline,
            target=target_point,
            margin=margin,
            component_weight_bytes=session.weights,
        )
        measured = None
        if verify:
            runs = []
            for k in range(repeat):
                tick(
                    step + 1 + k,
                    total,
                    f"verifying at the target {_describe(target_point)} ({k + 1}/{repeat})",
                )
                runs.append(session.run(target_point))
            measured = min(runs, key=lambda r: (not r.ok, r.duration_s))
        tick(total, total, "done")
    errors = tuple(
        f"{role}: {r.error.type}: {r.error.message}"
        for role, r in zip((*roles, "target"), (*records, measured))
        if r is not None and r.error is not None
    )
    return Calibration(
        example=example.name,
        pipeline=pipeline.name,
        formula_path=str(formula_path),
        device=device,
        backend=session.recorder.backend.name,
        warmup=warmup_point,
        probe=probe_point,
        target=target_point,
        work_ratio=work_ratio(pipeline, probe_point, target_point),
        roles=roles,
        records=tuple(records),
        estimate=result,
        measured=measured,
        component_weight_bytes=session.weights,
        errors=errors,
        second_probe=second,
    )


def second_probe(
    pipeline: Any, warmup: Params, probe: Params, target: Params
) -> dict[str, int | bool] | None:
    """A third size when the warmup and the probe leave a stage's memory terms open at the target.

    A stage whose memory has several terms is fitted by a plane, defined at the target only when the
    measured sizes move in the directions the target does (docs/estimators.md); a warmup and a probe
    that differ in area *and* frames do not. The candidates take the probe (or the warmup) with one
    of their differing params from the other; the cheapest admissible one that closes every stage
    (least total memory measure x iterations) is run alongside the probe. None when none is needed
    or none helps.
    """
    if not undetermined_stages(pipeline, [warmup, probe], target):
        return None
    candidates = []
    for name in (k for k in probe if probe[k] != warmup[k]):
        for base, other in ((probe, warmup), (warmup, probe)):
            point = {**base, name: other[name]}
            if (
                point not in (dict(warmup), dict(probe))
                and pipeline.is_admissible(**point)
                and not undetermined_stages(pipeline, [warmup, probe, point], target)
            ):
                candidates.append(point)
    if not candidates:
        return None

    def cost(point: dict[str, int | bool]) -> Fraction:
        values = pipeline.evaluate(**point)
        return sum((Fraction(v.iterations * v.memory) for v in values.values()), Fraction(0))

    return min(candidates, key=cost)


def _describe(params: Mapping[str, int | bool]) -> str:
    return ",".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items()
    )
