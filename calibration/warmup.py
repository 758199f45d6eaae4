"""Probe planning: the largest warmup probe that fits in free memory, lightened frames-first.

The probe is lightened along a fixed, deterministic sequence (``lighten_sequence``): step ``k`` of
the sequence is the same shape on every rank, so ranks agree on a probe by agreeing on ``k`` alone
(``runtime.measure.distributed``). Frames go first: halve the latent frame count, then walk down to
the largest value the pipeline's contracts admit; then the area: halve it with both sides aligned to
the model's alignment. Nothing goes below the bounded warmup shape (``floor``).

The predicted peak of a shape is deliberately simple (the estimators refine it later): the largest
successful record's above-baseline peak, scaled by the ratio of ``frames * height * width``.

A stage whose memory measure has several terms (``memory ~ [height * width, latent_frames * height
* width]``) is estimated from a plane through the measured sizes, which is defined at the target
only when the sizes move in the directions the target does (runtime/estimate/planes.py). A
frames-lightened probe and the floor leave the frames direction open, so ``calibrate`` then runs
one more, lighter shape of the sequence that closes it (``undetermined_stages``).
"""

from __future__ import annotations

import gc
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from attrs import field, frozen

from runtime.estimate.points import undetermined_stages
from runtime.measure.distributed import LOCAL, Agreement
from runtime.measure.recorder import FormulaPipeline, Request, WarmupRecorder
from runtime.record import ErrorInfo, WarmupRecord

GiB = 1 << 30
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


def allocator_margin(total_bytes: int) -> int:
    """Room left for allocator fragmentation and workspaces: max(1 GiB, 2 % of the device)."""
    return max(GiB, -(-total_bytes * 2 // 100))


@frozen
class ProbeAxes:
    """Which params shape a probe, and the model's compression and alignment."""

    frames: str = "frames"
    height: str = "height"
    width: str = "width"
    temporal_compression: int = 4
    alignment: int = 16

    def latent_frames(self, frames: int) -> int:
        """Latent frames of a video of ``frames`` frames (the VAE keeps the first frame apart)."""
        return (frames - 1) // self.temporal_compression + 1

    def frames_for(self, latent_frames: int) -> int:
        """The frame count whose latent frame count is ``latent_frames``."""
        return (latent_frames - 1) * self.temporal_compression + 1

    def volume(self, shape: Mapping[str, Any]) -> int:
        """``frames * height * width``: what the simple peak prediction scales with."""
        return int(shape[self.frames]) * int(shape[self.height]) * int(shape[self.width])


def _largest(
    pipeline: FormulaPipeline, name: str, at_most: int, floor: int, shape: Mapping[str, Any]
) -> int:
    """The largest admissible value of ``name`` in ``[floor, at_most]`` (``floor`` when none is)."""
    if at_most <= floor:
        return floor
    others = {k: v for k, v in shape.items() if k != name}
    found = pipeline.largest_admissible(name, at_most=at_most, **others)
    return floor if found is None or found < floor else found


def lighten(
    pipeline: FormulaPipeline, shape: Mapping[str, Any], floor: Mapping[str, Any], axes: ProbeAxes
) -> dict[str, Any] | None:
    """One step lighter than ``shape`` (frames first, then area), or None at the floor."""
    frames, f_floor = int(shape[axes.frames]), int(floor[axes.frames])
    if frames > f_floor:
        halved = axes.frames_for(max(1, axes.latent_frames(frames) // 2))
        new = _largest(pipeline, axes.frames, min(halved, frames - 1), f_floor, shape)
        if new < frames:
            return {**shape, axes.frames: new}
    height, width = int(shape[axes.height]), int(shape[axes.width])
    h_floor, w_floor = int(floor[axes.height]), int(floor[axes.width])
    if height * width <= h_floor * w_floor:
        return None
    align = axes.alignment
    target = height * width // 2
    new_h = max(h_floor, math.isqrt(height * height // 2) // align * align)
    new_w = min(width, max(w_floor, target // max(new_h, 1) // align * align))
    new_h = _largest(pipeline, axes.height, new_h, h_floor, {**shape, axes.width: new_w})
    new_w = _largest(pipeline, axes.width, new_w, w_floor, {**shape, axes.height: new_h})
    if (new_h, new_w) == (height, width) or new_h * new_w >= height * width:
        return None
    return {**shape, axes.height: new_h, axes.width: new_w}


def lighten_sequence(
    pipeline: FormulaPipeline,
    start: Mapping[str, Any],
    floor: Mapping[str, Any],
    axes: ProbeAxes = ProbeAxes(),
) -> tuple[dict[str, Any], ...]:
    """``start``, then each lighter shape, ending at the floor-most shape reachable."""
    shapes = [dict(start)]
    while (nxt := lighten(pipeline, shapes[-1], floor, axes)) is not None:
        shapes.append(nxt)
    return tuple(shapes)


@frozen
class PeakPrediction:
    """A predicted above-baseline peak and the record it was scaled from."""

    bytes: int
    reference_params: Mapping[str, Any] = field(hash=False)
    reference_peak: int
    method: str = "largest record's above-baseline peak x frames*height*width ratio"


def predict_peak(
    records: Sequence[WarmupRecord], shape: Mapping[str, Any], axes: ProbeAxes = ProbeAxes()
) -> PeakPrediction | None:
    """Scale the largest successful record's above-baseline peak to ``shape`` (None: no record)."""
    usable = [r for r in records if r.ok and axes.volume(r.params) > 0]
    if not usable:
        return None
    ref = max(usable, key=lambda r: (axes.volume(r.params), r.peak_above_baseline))
    scaled = Fraction(ref.peak_above_baseline * axes.volume(shape), axes.volume(ref.params))
    return PeakPrediction(math.ceil(scaled), dict(ref.params), ref.peak_above_baseline)


@frozen
class ProbePlan:
    """The chosen probe: its params, its index in the lighten sequence, and why."""

    params: Mapping[str, Any] = field(hash=False)
    lighten_steps: int
    shapes: tuple[Mapping[str, Any], ...] = field(hash=False)
    prediction: PeakPrediction | None
    budget: int
    fits: bool
    reason: str


def plan_probe(
    pipeline: FormulaPipeline,
    records: Sequence[WarmupRecord],
    *,
    start: Mapping[str, Any],
    floor: Mapping[str, Any],
    free_bytes: int,
    total_bytes: int,
    axes: ProbeAxes = ProbeAxes(),
) -> ProbePlan:
    """The first shape of the lighten sequence whose predicted peak fits ``free - margin``."""
    shapes = lighten_sequence(pipeline, start, floor, axes)
    budget = free_bytes - allocator_margin(total_bytes)
    if predict_peak(records, shapes[0], axes) is None:
        last = len(shapes) - 1
        return ProbePlan(
            shapes[last],
            last,
            shapes,
            None,
            budget,
            False,
            "no successful record to predict from: the lightest shape",
        )
    for k, shape in enumerate(shapes):
        prediction = predict_peak(records, shape, axes)
        assert prediction is not None
        if prediction.bytes <= budget:
            return ProbePlan(
                shape,
                k,
                shapes,
                prediction,
                budget,
                True,
                f"predicted {prediction.bytes} B fits {budget} B",
            )
    last = len(shapes) - 1
    prediction = predict_peak(records, shapes[last], axes)
    return ProbePlan(
        shapes[last], last, shapes, prediction, budget, False, "nothing fits: the lightest shape"
    )


# --- running a probe: retry lighter on out-of-memory, fail open otherwise ----------------------

#: Attempt status, agreed across ranks with MAX: any rank's failure decides for all.
OK, OUT_OF_MEMORY, FAILED = 0, 1, 2


@frozen
class ProbeAttempt:
    """One try of a probe shape and how it ended."""

    params: Mapping[str, Any] = field(hash=False)
    lighten_steps: int
    error: ErrorInfo | None
    out_of_memory: bool


@frozen
class ProbeOutcome:
    """The end of a warmup: calibrated with a record, or not (serving goes on uncalibrated).

    ``determining`` holds the probe run after the main one so that the records determine every
    stage's memory terms at the target (empty when they already did, or nothing lighter could).
    """

    calibrated: bool
    record: WarmupRecord | None
    attempts: tuple[ProbeAttempt, ...]
    lighten_steps: int | None
    reason: str
    plan: ProbePlan | None = None
    determining: tuple[ProbeAttempt, ...] = ()


def _attempt(
    recorder: WarmupRecorder, params: Mapping[str, Any], body: Callable[[Request], object]
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
    shapes: Sequence[Mapping[str, Any]],
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


def calibrate(
    recorder: WarmupRecorder,
    body: Callable[[Request], object],
    *,
    start: Mapping[str, Any],
    floor: Mapping[str, Any],
    axes: ProbeAxes = ProbeAxes(),
    max_retries: int = 3,
    agreement: Agreement = LOCAL,
    determine_terms: bool = True,
) -> ProbeOutcome:
    """The whole warmup: the bounded shape first (if nothing is recorded), then the largest fit,
    then (``determine_terms``) a lighter shape if the records leave a stage's memory terms at
    ``start`` undetermined.

    Never raises for a failing warmup: the outcome says ``calibrated=False`` and why.
    """
    try:
        if not any(r.ok for r in recorder.records):
            first = run_probe(recorder, [floor], body, max_retries=0, agreement=agreement)
            if not first.calibrated:
                return first
        free, total = recorder.backend.memory_info()
        plan = plan_probe(
            recorder.pipeline,
            recorder.records,
            start=start,
            floor=floor,
            free_bytes=free,
            total_bytes=total,
            axes=axes,
        )
        outcome = run_probe(
            recorder,
            plan.shapes,
            body,
            start_step=plan.lighten_steps,
            max_retries=max_retries,
            agreement=agreement,
        )
        determining: tuple[ProbeAttempt, ...] = ()
        reason = outcome.reason
        if outcome.calibrated and determine_terms and outcome.lighten_steps is not None:
            determining, note = _determine_terms(
                recorder, plan.shapes, outcome.lighten_steps, start, body, agreement, max_retries
            )
            reason += note
        return ProbeOutcome(
            outcome.calibrated,
            outcome.record,
            outcome.attempts,
            outcome.lighten_steps,
            reason,
            plan,
            determining,
        )
    except Exception as exc:  # noqa: BLE001 - fail open: serving goes on without calibration
        log.warning("warmup fails open: %s: %s", type(exc).__name__, exc)
        return ProbeOutcome(False, None, (), None, f"warmup failed: {type(exc).__name__}: {exc}")


# --- a probe that determines every memory term at the target --------------------------------------


def _determine_terms(
    recorder: WarmupRecorder,
    shapes: Sequence[Mapping[str, Any]],
    chosen: int,
    target: Mapping[str, Any],
    body: Callable[[Request], object],
    agreement: Agreement,
    max_retries: int,
) -> tuple[tuple[ProbeAttempt, ...], str]:
    """Run the first lighter shape that closes every open stage (retrying lighter ones on
    failure).
    """
    measured = [dict(r.params) for r in recorder.records if r.ok]
    open_stages = undetermined_stages(recorder.pipeline, measured, target)
    if not open_stages:
        return (), ""
    candidates = [
        shape
        for shape in shapes[chosen + 1 :]
        if not undetermined_stages(recorder.pipeline, [*measured, shape], target)
    ]
    attempts: list[ProbeAttempt] = []
    for shape in candidates[: max_retries + 1]:
        outcome = run_probe(recorder, [shape], body, max_retries=0, agreement=agreement)
        attempts += outcome.attempts
        if outcome.calibrated:
            return tuple(
                attempts
            ), f"; {', '.join(open_stages)} determined by a probe at {dict(shape)}"
    why = "failed" if attempts else "no lighter shape determines them"
    note = f"; memory terms of {', '.join(open_stages)} stay undetermined at the target ({why})"
    log.warning("warmup: %s", note[2:])
    return tuple(attempts), note
