"""Does the plan in force hold on a measured request? And what do its measurements say to re-plan?

Pure (no torch): a ``WarmupRecord`` of one request run under the plan is compared phase by phase
with the plan's prediction (the phase's bound + the weights the plan puts on the device in it) and
with capacity - reserve. On the CPU the device and the host are one memory (``shared_memory``):
the host copies of what the plan keeps off the device are in the measured peak, so they are taken
out of it before comparing.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from artifact.units import show_bytes
from calibration.calibrate.warmup import OOM_MARKERS as WARMUP_OOM_MARKERS
from calibration.lifecycle.model import Baseline, Failure, PhaseCheck, SpeedCheck, Validation
from calibration.plan.inputs import target_name
from calibration.plan.model import PlacementKind, Plan, Target
from runtime.estimate.peaks import phase_label
from runtime.record import ErrorInfo, WarmupRecord

#: The warmup's allocation-failure markers, plus the exception type names a record's error keeps
#: (``OutOfMemoryError``, ``MemoryError``), which the warmup tests by ``isinstance`` instead.
OOM_MARKERS = (*WARMUP_OOM_MARKERS, "outofmemory", "memoryerror")


def is_out_of_memory(error: ErrorInfo) -> bool:
    """Whether a recorded error is an allocation failure (by its type name or its message)."""
    text = f"{error.type} {error.message}".lower()
    return any(marker in text for marker in OOM_MARKERS)


def weights_total(plan: Plan) -> int:
    """Every planned component's weights: what stays on the device plus what is streamed in."""
    return sum(p.device_bytes + p.pinned_bytes for p in plan.placements)


def measured_phases(plan: Plan, record: WarmupRecord, *, shared_memory: bool) -> dict[str, int]:
    """Each measured phase's device bytes by label (host copies out when ``shared_memory``)."""
    total = weights_total(plan)
    name = target_name(record.params)
    held = {u.label: u.weights_bytes for u in plan.phases if u.target == name}
    out: dict[str, int] = {}
    for p in record.phases:
        label = phase_label(p.kind, p.name, p.stage)
        if label not in held:
            continue
        host = total - held[label] if shared_memory else 0
        out[label] = max(out.get(label, 0), p.peak_allocated - host)
    return out


def _last_stage(record: WarmupRecord) -> str | None:
    """The stage the request was in when it failed: the last one it opened."""
    return record.phases[-1].stage if record.phases else None


def validate(plan: Plan, record: WarmupRecord, *, shared_memory: bool) -> Validation:
    """The plan against one request run under it: holds when every phase is within its
    prediction and capacity - reserve and the request succeeded."""
    measured = measured_phases(plan, record, shared_memory=shared_memory)
    usable = plan.device.usable_bytes
    name = target_name(record.params)
    checks = tuple(
        PhaseCheck(
            u.target,
            u.label,
            u.bound_bytes + u.weights_bytes,
            measured.get(u.label) if u.target == name else None,
            usable,
        )
        for u in plan.phases
    )
    if not any(u.target == name for u in plan.phases):
        return Validation(
            Failure.REQUEST_ERROR, f"the plan was not made for the shape {name}", checks
        )
    if record.error is not None:
        oom = is_out_of_memory(record.error)
        stage = _last_stage(record)
        return Validation(
            Failure.OUT_OF_MEMORY if oom else Failure.REQUEST_ERROR,
            f"{'out of memory' if oom else 'the request failed'}"
            f"{f' in {stage}' if stage else ''}: {record.error.type}: {record.error.message}",
            checks,
            stage,
        )
    over_capacity = [c for c in checks if c.over_capacity]
    if over_capacity:
        worst = max(over_capacity, key=lambda c: (c.measured_bytes or 0) - c.usable_bytes)
        return Validation(
            Failure.OVER_CAPACITY,
            f"{len(over_capacity)} phase(s) above capacity - reserve ({show_bytes(usable)}); "
            f"the worst, {worst.label}, measured {show_bytes(worst.measured_bytes)}",
            checks,
        )
    over = [c for c in checks if c.over_bound]
    if over:
        worst = max(over, key=lambda c: (c.measured_bytes or 0) - c.predicted_bytes)
        return Validation(
            Failure.OVER_BOUND,
            f"{len(over)} phase(s) above the plan's bound; the worst, {worst.label}, measured "
            f"{show_bytes(worst.measured_bytes)} against {show_bytes(worst.predicted_bytes)} "
            "predicted",
            checks,
        )
    seen = sum(c.measured_bytes is not None for c in checks)
    return Validation(
        Failure.NONE,
        f"every measured phase ({seen} of {len(checks)}) within its bound and "
        f"{show_bytes(usable)} usable",
        checks,
    )


def judge_speed(
    validation: Validation, plan: Plan, record: WarmupRecord, baseline: Baseline
) -> Validation:
    """``validation`` with the request's time beside the prediction; a placement that held in
    memory but is too slow (``SpeedCheck.too_slow``) fails as ``TOO_SLOW``."""
    if record.error is not None:
        return validation
    try:
        predicted = _predicted_at(plan, target_name(record.params), baseline.link_bytes_per_s)
    except KeyError:
        predicted = None
    speed = SpeedCheck(predicted, record.duration_s, baseline.spread_s, baseline.previous_s)
    judged = attrs.evolve(validation, speed=speed)
    if not validation.holds or not speed.too_slow or not baseline.judged:
        return judged
    assert speed.predicted_s is not None and speed.previous_s is not None  # too_slow says so
    slower = speed.measured_s / speed.previous_s - 1
    return attrs.evolve(
        judged,
        failure=Failure.TOO_SLOW,
        reason=f"{validation.reason}, but slower: {speed.measured_s:.3g} s measured against "
        f"{speed.predicted_s:.3g} s predicted (spread {speed.spread_s:.3g} s), {slower:.0%} slower "
        f"than before the plan ({speed.previous_s:.3g} s)",
    )


def _predicted_at(plan: Plan, target: str, link: float | None) -> float | None:
    """The plan's predicted time at ``target`` with its copies on ``link`` (None: the plan's own),
    without a kept measured cost: the judgement never absorbs a slowdown it measured before."""
    time = plan.predicted(target)
    if time.compute_s is None:
        return None
    if link is None or link <= 0:  # a placement's kept measured cost never absorbs a slowdown
        return time.compute_s + time.exposed_s
    transfer = time.transfer_s * plan.device.bandwidth_bytes_per_s / link
    return time.compute_s + max(transfer - time.hidden_s, 0.0)


def revised_bounds(
    plan: Plan, validation: Validation, record: WarmupRecord, *, shared_memory: bool
) -> list[int]:
    """Each planned phase's bound with the measurement in place of the estimate (plan order).

    A measured phase's bound is what it held beyond the plan's weights, when more than the
    estimate. A phase of the stage an out-of-memory error struck in needed more than the plan left
    it: its bound becomes all the plan left it plus one byte, so a re-plan must free more there.
    """
    measured = measured_phases(plan, record, shared_memory=shared_memory)
    stages = {phase_label(p.kind, p.name, p.stage): p.stage for p in record.phases}
    name = target_name(record.params)
    out = []
    for u in plan.phases:
        bound = u.bound_bytes
        if u.target != name:
            out.append(bound)
            continue
        if u.label in measured:
            bound = max(bound, measured[u.label] - u.weights_bytes)
        struck = stages.get(u.label) is not None and stages[u.label] == validation.failed_stage
        if validation.failure is Failure.OUT_OF_MEMORY and struck:
            bound = max(bound, u.bound_bytes + max(u.headroom_bytes, 0) + 1)
        out.append(bound)
    return out


def moved_bounds(plan: Plan, targets: Sequence[Target], component: str) -> list[int]:
    """Each planned phase's bound after ``component``'s move ran out of memory while applying: it
    needed more than the plan left it, so every phase that holds it on the device (every phase
    when the plan keeps it there, else those it is active in) gets all the plan left plus one byte.
    """
    kind = next((p.kind for p in plan.placements if p.component == component), None)
    on_the_host = (PlacementKind.OFFLOADED, PlacementKind.GROUPED)
    everywhere = kind is not None and kind not in on_the_host
    phases = [p for t in targets for p in t.phases]
    return [
        u.bound_bytes + max(u.headroom_bytes, 0) + 1
        if everywhere or component in p.present
        else u.bound_bytes
        for u, p in zip(plan.phases, phases, strict=True)
    ]


def planned_bounds(targets: Sequence[Target]) -> list[int]:
    """Every phase's bound, in the order a plan lists its phases (targets, then phases)."""
    return [p.bound_bytes for t in targets for p in t.phases]


def with_bounds(targets: Sequence[Target], bounds: Sequence[int]) -> tuple[Target, ...]:
    """The targets with their phases' bounds replaced, in the order ``planned_bounds`` gives."""
    given = iter(bounds)
    return tuple(
        attrs.evolve(t, phases=tuple(attrs.evolve(p, bound_bytes=next(given)) for p in t.phases))
        for t in targets
    )
