"""The serving warmup: the largest probe that fits in free memory, then the sizes the formulas need.

The probe is lightened along a fixed, deterministic sequence (``lighten_sequence``): step ``k`` of
the sequence is the same shape on every rank, so ranks agree on a probe by agreeing on ``k`` alone
(``runtime.measure.distributed``). The formulas say what to lighten (``probe frames`` then ``probe
height, width``): each group in turn is halved (a group of several params shrinks together, each
side by the same factor), walking down to the largest values the pipeline's contracts admit. A
pipeline without frames simply declares no frames axis. Nothing goes below the bounded warmup
shape (``floor``), nor below a declared probe minimum (``probe frames >= 9``: the floor is raised
to it).

The predicted peak of a shape comes from the estimators over the records so far, through the
formulas (``runtime.estimate``): the same figure calibration reports, with its margin.

Then the one probe policy (``calibration.probes.policy``) picks lighter shapes of the sequence
until every declared memory and time term is determined at the target, and
``calibration.probes.findings`` tests the sizes against the formulas (findings in the outcome).
"""

from __future__ import annotations

import gc
import logging
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

from attrs import field, frozen

from artifact.point import Point
from artifact.units import show_bytes
from calibration.plan.memory import allocator_margin
from calibration.probes.findings import Finding, check
from calibration.probes.minimums import raise_to_minimums
from calibration.probes.policy import next_probe, open_stages
from runtime import Pipeline
from runtime.estimate import DEFAULT_MARGIN, estimate
from runtime.measure.distributed import LOCAL, Agreement
from runtime.measure.recorder import Request, WarmupRecorder
from runtime.record import ErrorInfo, WarmupRecord

log = logging.getLogger(__name__)

#: Substrings (lower-cased) of messages that mean an allocation failed, whatever the exception type.
OOM_MARKERS = (
    "out of memory",
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
    "cufft_alloc_failed",
    "cusolver_status_alloc_failed",
    "cudaerrormemoryallocation",
    "hiperroroutofmemory",
    "miopen_status_alloc_failed",
    "cannot allocate memory",
    "can't allocate memory",
    "failed to allocate memory",
)


def is_out_of_memory(exc: BaseException) -> bool:
    """True for ``torch.OutOfMemoryError``, ``MemoryError`` and allocation failures by message."""
    import torch

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (torch.OutOfMemoryError, MemoryError)):
            return True
        text = str(current).lower()
        if any(marker in text for marker in OOM_MARKERS):
            return True
        current = current.__cause__ or current.__context__
    return False


def _largest(pipeline: Pipeline, name: str, at_most: int, floor: int, shape: Point) -> int:
    """The largest admissible value of ``name`` in ``[floor, at_most]`` (``floor`` when none is)."""
    if at_most <= floor:
        return floor
    others = {k: v for k, v in shape.items() if k != name}
    found = pipeline.largest_admissible(name, at_most, **others)
    return floor if found is None or found < floor else found


def _scaled(value: int, factor: float) -> int:
    """``int(value * factor)``, exact past a float's range (a huge default is not an overflow)."""
    if value.bit_length() < 1000:
        return int(value * factor)
    ratio = Fraction(factor)
    return value * ratio.numerator // ratio.denominator


def _shrink(
    pipeline: Pipeline, shape: Point, floor: Point, group: Sequence[str]
) -> dict[str, int | bool] | None:
    """``shape`` with the product of ``group``'s params about halved (each side alike), or None.

    No axis goes below its floor, nor below the formulas' probe minimum (`probe frames >= 9`)."""
    values = [int(shape[n]) for n in group]
    minimums = pipeline.probe_minimums
    floors = [max(int(floor.get(n, 0)), minimums.get(n, 0)) for n in group]
    if math.prod(values) <= math.prod(floors) or all(v <= f for v, f in zip(values, floors)):
        return None
    factor = 0.5 ** (1 / len(group))
    new = dict(shape)
    for name, value, low in zip(group, values, floors):
        new[name] = _largest(
            pipeline, name, max(low, min(value - 1, _scaled(value, factor))), low, new
        )
    if math.prod(int(new[n]) for n in group) >= math.prod(values):
        return None
    return new if pipeline.is_admissible(**new) else None


def lighten(pipeline: Pipeline, shape: Point, floor: Point) -> dict[str, int | bool] | None:
    """One step lighter than ``shape`` along the first probe axis group that can shrink, or None."""
    for group in pipeline.probe_axes:
        lighter = _shrink(pipeline, shape, floor, group)
        if lighter is not None:
            return lighter
    return None


def lighten_sequence(
    pipeline: Pipeline, start: Point, floor: Point
) -> tuple[dict[str, int | bool], ...]:
    """``start``, then each lighter shape, ending at the floor-most shape reachable."""
    shapes = [dict(start)]
    while (nxt := lighten(pipeline, shapes[-1], floor)) is not None:
        shapes.append(nxt)
    return tuple(shapes)


@frozen
class PeakPrediction:
    """A predicted above-baseline peak of a shape, and how the estimators obtained it."""

    bytes: int
    method: str
    reason: str


def predict_peak(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    shape: Point,
    margin: float = DEFAULT_MARGIN,
) -> PeakPrediction | None:
    """The request peak at ``shape`` above the current baseline, by the estimators (None: no
    successful record, or nothing the estimators can say)."""
    usable = [r for r in records if r.ok]
    if not usable:
        return None
    result = estimate(usable, pipeline, target=dict(shape), margin=margin)
    peak = result.request_peak
    if peak.bound_bytes is None:
        return None
    baseline = usable[-1].baseline_allocated
    return PeakPrediction(max(0, peak.bound_bytes - baseline), peak.method, peak.reason)


@frozen
class ProbePlan:
    """The chosen probe: its params, its index in the lighten sequence, and why."""

    params: Point = field(hash=False)
    lighten_steps: int
    shapes: tuple[Point, ...] = field(hash=False)
    prediction: PeakPrediction | None
    budget: int
    fits: bool
    reason: str


def plan_probe(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    *,
    start: Point,
    floor: Point,
    free_bytes: int,
    total_bytes: int,
) -> ProbePlan:
    """The first shape of the lighten sequence whose predicted peak fits ``free - margin``."""
    shapes = lighten_sequence(pipeline, start, floor)
    budget = free_bytes - allocator_margin(total_bytes)
    last = len(shapes) - 1
    for k, shape in enumerate(shapes):
        prediction = predict_peak(pipeline, records, shape)
        if prediction is None:
            return ProbePlan(
                shapes[last],
                last,
                shapes,
                None,
                budget,
                False,
                "no estimate to predict from: the lightest shape",
            )
        if prediction.bytes <= budget:
            return ProbePlan(
                shape,
                k,
                shapes,
                prediction,
                budget,
                True,
                f"predicted {show_bytes(prediction.bytes)} ({prediction.method}) fits "
                f"{show_bytes(budget)}",
            )
    prediction = predict_peak(pipeline, records, shapes[last])
    return ProbePlan(
        shapes[last], last, shapes, prediction, budget, False, "nothing fits: the lightest shape"
    )


# --- running a probe: retry lighter on out-of-memory, fail open otherwise ----------------------

#: Attempt status, agreed across ranks with MAX: any rank's failure decides for all.
OK, OUT_OF_MEMORY, FAILED = 0, 1, 2


@frozen
class ProbeAttempt:
    """One try of a probe shape and how it ended."""

    params: Point = field(hash=False)
    lighten_steps: int
    error: ErrorInfo | None
    out_of_memory: bool


@frozen
class ProbeOutcome:
    """The end of a warmup: calibrated with a record, or not (serving goes on uncalibrated).

    ``determining`` holds the probes run after the main one so that the records determine every
    stage's memory and time terms at the target (empty when they already did, or nothing lighter
    could); ``findings`` what ``calibration.probes.findings`` says of the sizes against the
    formulas.
    """

    calibrated: bool
    record: WarmupRecord | None
    attempts: tuple[ProbeAttempt, ...]
    lighten_steps: int | None
    reason: str
    plan: ProbePlan | None = None
    determining: tuple[ProbeAttempt, ...] = ()
    findings: tuple[Finding, ...] = ()


def _attempt(
    recorder: WarmupRecorder, params: Point, body: Callable[[Request], object]
) -> tuple[int, ErrorInfo | None, WarmupRecord | None]:
    """Run one probe; never raises (the exception, and the tensors its traceback pins, end here)."""
    try:
        with recorder.request(**params) as req:
            body(req)
        return OK, None, req.record
    except Exception as exc:  # noqa: BLE001 - warmup fails open; the error is recorded, not lost
        return (
            (OUT_OF_MEMORY if is_out_of_memory(exc) else FAILED),
            ErrorInfo.from_exception(exc),
            None,
        )


def run_probe(
    recorder: WarmupRecorder,
    shapes: Sequence[Point],
    body: Callable[[Request], object],
    *,
    start_step: int = 0,
    max_retries: int = 3,
    agreement: Agreement = LOCAL,
) -> ProbeOutcome:
    """Run ``shapes[start_step]``; on out-of-memory on any rank retry a step lighter."""
    step = min(agreement.max_int(start_step), len(shapes) - 1)
    attempts: list[ProbeAttempt] = []
    for _ in range(max_retries + 1):
        status, error, record = _attempt(recorder, shapes[step], body)
        attempts.append(ProbeAttempt(dict(shapes[step]), step, error, status == OUT_OF_MEMORY))
        worst = agreement.max_int(status)
        if worst == OK:
            return ProbeOutcome(True, record, tuple(attempts), step, "probe succeeded")
        if worst == FAILED:
            reason = (
                f"probe failed: {error.type}: {error.message}"
                if error
                else "probe failed on another rank"
            )
            log.warning("warmup fails open: %s", reason)
            return ProbeOutcome(False, None, tuple(attempts), None, reason)
        gc.collect()
        recorder.backend.release_pool()
        if step + 1 >= len(shapes):
            break
        step += 1
    reason = f"out of memory after {len(attempts)} attempt(s), down to {dict(shapes[step])}"
    log.warning("warmup fails open: %s", reason)
    return ProbeOutcome(False, None, tuple(attempts), None, reason)


def warm_up(
    recorder: WarmupRecorder,
    body: Callable[[Request], object],
    *,
    start: Point,
    floor: Point,
    max_retries: int = 3,
    agreement: Agreement = LOCAL,
    determine_terms: bool = True,
) -> ProbeOutcome:
    """The whole warmup: the bounded shape first (if nothing is recorded), then the largest fit,
    then (``determine_terms``) lighter shapes until every declared term at ``start`` is determined.

    ``recorder.pipeline`` must be the loaded formulas (``runtime.Pipeline``): they give the probe
    axes and the terms. Never raises for a failing warmup: the outcome says ``calibrated=False``
    and why.
    """
    try:
        pipeline: Pipeline = recorder.pipeline  # type: ignore[assignment]
        floor = raise_to_minimums(pipeline, floor, start)
        if not any(r.ok for r in recorder.records):
            first = run_probe(recorder, [floor], body, max_retries=0, agreement=agreement)
            if not first.calibrated:
                return first
        plan, outcome = _largest_fit(recorder, body, pipeline, start, floor, max_retries, agreement)
        determining: tuple[ProbeAttempt, ...] = ()
        reason = outcome.reason
        if outcome.calibrated and determine_terms and outcome.lighten_steps is not None:
            determining, note = _determine_terms(
                recorder, plan.shapes, outcome.lighten_steps, start, body, agreement, max_retries
            )
            reason += note
        findings = (
            check(pipeline, recorder.records, start, recorder.backend.name).findings
            if outcome.calibrated
            else ()
        )
        for finding in findings:
            log.warning("warmup: %s: %s", finding.kind, finding.message)
        return ProbeOutcome(
            outcome.calibrated,
            outcome.record,
            outcome.attempts,
            outcome.lighten_steps,
            reason,
            plan,
            determining,
            findings,
        )
    except Exception as exc:  # noqa: BLE001 - fail open: serving goes on without calibration
        log.warning("warmup fails open: %s: %s", type(exc).__name__, exc)
        return ProbeOutcome(False, None, (), None, f"warmup failed: {type(exc).__name__}: {exc}")


def _largest_fit(
    recorder: WarmupRecorder,
    body: Callable[[Request], object],
    pipeline: Pipeline,
    start: Point,
    floor: Point,
    max_retries: int,
    agreement: Agreement,
) -> tuple[ProbePlan, ProbeOutcome]:
    """The largest shape predicted to fit in free memory, run (retried lighter on out-of-memory)."""
    free, total = recorder.backend.memory_info()
    plan = plan_probe(
        pipeline,
        recorder.records,
        start=start,
        floor=floor,
        free_bytes=free,
        total_bytes=total,
    )
    outcome = run_probe(
        recorder,
        plan.shapes,
        body,
        start_step=plan.lighten_steps,
        max_retries=max_retries,
        agreement=agreement,
    )
    return plan, outcome


# --- probes that determine every declared term at the target --------------------------------------


def _determine_terms(
    recorder: WarmupRecorder,
    shapes: Sequence[Point],
    chosen: int,
    target: Point,
    body: Callable[[Request], object],
    agreement: Agreement,
    max_retries: int,
) -> tuple[tuple[ProbeAttempt, ...], str]:
    """Run lighter shapes, one policy choice at a time, until nothing is open (or none helps)."""
    pipeline: Pipeline = recorder.pipeline  # type: ignore[assignment]
    attempts: list[ProbeAttempt] = []
    lighter = list(shapes[chosen + 1 :])
    tried: list[dict[str, int | bool]] = []
    ran: list[str] = []
    for _ in range(max_retries + 1):
        measured = [dict(r.params) for r in recorder.records if r.ok]
        candidates = [s for s in lighter if dict(s) not in tried]
        shape = next_probe(pipeline, measured, target, candidates)
        if shape is None:
            break
        tried.append(shape)
        outcome = run_probe(recorder, [shape], body, max_retries=0, agreement=agreement)
        attempts += outcome.attempts
        if outcome.calibrated:
            ran.append(str(shape))
    measured = [dict(r.params) for r in recorder.records if r.ok]
    still = [f"{s} {q}" for s, q in open_stages(pipeline, measured, target)]
    note = f"; determined by probes at {', '.join(ran)}" if ran else ""
    if still:
        why = "a probe failed" if len(ran) < len(tried) else "no lighter shape determines them"
        note += f"; {', '.join(still)} stay undetermined at the target ({why})"
        log.warning("warmup: %s", note[2:])
    return tuple(attempts), note
