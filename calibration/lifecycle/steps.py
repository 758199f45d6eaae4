"""The lifecycle's steps, each recorded as it happens: measure, plan, apply and validate, re-warm.

``Log`` keeps the steps and every record measured (a later failure never loses them); the
functions here run one step on a ``calibration.core.session.Session`` and say what they decided.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

import attrs
from attrs import define, field, frozen

from artifact.point import Point
from calibration.lifecycle.agree import worst_failure
from calibration.lifecycle.bounded import GOING_ON, INTERRUPTED, STUCK, stop_together
from calibration.lifecycle.model import (
    PLANNING,
    Baseline,
    Failure,
    JsonValue,
    Mode,
    Step,
    StepName,
    Validation,
)
from calibration.lifecycle.validate import is_out_of_memory, judge_speed, validate
from calibration.plan.apply import Applied, MoveError, UndoError, apply
from calibration.plan.inputs import Whole, from_calibration
from calibration.plan.model import Component, Device, Plan, Target
from calibration.plan.pinning import WORKER, PinBook
from calibration.plan.report import placement_text, show_bytes
from runtime.estimate import DEFAULT_MARGIN
from runtime.measure.distributed import LOCAL, Agreement
from runtime.record import ErrorInfo, WarmupRecord

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration
    from calibration.core.session import Session


@frozen
class Settings:
    """How a worker runs the lifecycle: the device to plan for, how far to go, how hard to try."""

    device: Device
    mode: Mode = field(default=Mode.APPLY, converter=Mode)
    max_replans: int = 2  # re-plans after the first plan fails, before the fallback
    offload_device: str = "cpu"
    margin: float = DEFAULT_MARGIN
    repeat: int = 1  # calibration rounds
    agreement: Agreement = field(default=LOCAL, eq=False)
    rank_timeout_s: float | None = None  # a collective's longest wait; None: ``default_timeout``
    whole: Whole = ()  # (stage, component): that stage needs the component whole (``--whole``)


@define
class Log:
    """The steps so far and every record measured, in order, and the pins of every placement
    (one pin state across the run's placements: apply, rollback, re-plan, fallback; a rollback
    keeps this worker's pins for the next placement, ``unpin`` releases them)."""

    steps: list[Step] = field(factory=list)
    records: list[WarmupRecord] = field(factory=list)
    placed_by: StepName | None = None  # which planning step chose the placement in force
    pins: PinBook = field(factory=PinBook)

    def add(self, name: StepName, outcome: str, detail: str, **data: JsonValue) -> None:
        self.steps.append(Step(name, outcome, detail, data))
        if name in PLANNING:
            self.placed_by = name

    def unpin(self) -> None:
        """No placement of this worker's is in force: the pins its rollbacks kept for the next
        placement released (a copy another owner holds stays)."""
        if self.pins.state.of(WORKER):
            self.pins.leave(WORKER)


def calibration_steps(log: Log, cal: Calibration, given: bool) -> None:
    """The warmup, the probes and the estimates of a calibration, as three steps."""
    log.records.extend(cal.records)
    roles = list(cal.roles)
    first = cal.records[roles.index("warmup")] if "warmup" in roles else None
    origin = "given" if given else "done"
    log.add(
        StepName.WARMUP,
        origin,
        f"bounded warmup at {shape_text(cal.shapes.warmup)}"
        + (f": peak {show_bytes(first.peak_allocated)}" if first and first.ok else ""),
        params=dict(cal.shapes.warmup),
        ok=bool(first and first.ok),
    )
    probes = [r for role, r in zip(roles, cal.records) if role not in ("warmup", "re-warm")]
    failed = sum(not r.ok for r in probes)
    log.add(
        StepName.PROBES,
        origin,
        f"{len(probes)} probe request(s), {failed} failed; probe {shape_text(cal.shapes.probe)}",
        requests=len(probes),
        failed=failed,
    )
    log.add(
        StepName.ESTIMATE,
        origin,
        f"{len(cal.estimate.phases)} phase bounds at {shape_text(cal.shapes.target)}",
        bounds={p.label: p.peak.bound_bytes for p in cal.estimate.phases},
    )


def plan_inputs(
    cal: Calibration, whole: Whole = ()
) -> tuple[tuple[Component, ...], tuple[Target, ...]]:
    """The planner's components and target from a calibration in memory (``whole``: the
    full-weight needs, ``Settings.whole``)."""
    found = from_calibration(cal, whole)
    return found.components, (found.target,)


def placement(plan: Plan) -> tuple[tuple[str, str], ...]:
    """Each component's placement as the tables spell it."""
    return tuple(
        (p.component, placement_text(p.kind, len(p.resident_layers), p.layers))
        for p in plan.placements
    )


def plan_step(log: Log, name: StepName, plan: Plan, why: str) -> None:
    """A plan (first, re-planned or fallback): its placements, or why nothing fits."""
    shown = ", ".join(f"{c} {k}" for c, k in placement(plan))
    predicted = plan.predicted_seconds if plan.feasible else None
    log.add(
        name,
        "done" if plan.feasible else "nothing fits",
        f"{why}: {shown}; transfer {show_bytes(plan.transfer_bytes)} per request"
        + ("" if plan.proven else f" (not proven the least: {plan.stopped_by})")
        + ("" if predicted is None else f"; predicted {predicted:.3g} s a request")
        if plan.feasible
        else f"{why}: {plan.reason}",
        placement=dict(placement(plan)),
        reason=plan.reason,
        transfer_bytes=plan.transfer_bytes,
        predicted_s=predicted,
        bandwidth_bytes_per_s=plan.device.bandwidth_bytes_per_s,
    )


@frozen
class Tried:
    """One plan applied and validated: the hooks (None once undone or when apply failed)."""

    applied: Applied | None
    validation: Validation
    record: WarmupRecord | None


#: No time before the plan: speed is shown, never judged.
UNMEASURED = Baseline()


def baseline(cal: Calibration) -> Baseline:
    """The request before any plan: the median time of the calibration's requests at the target,
    and the spread of its timings (those requests' range, or the estimate's, the larger)."""
    times = sorted(
        r.duration_s for r in cal.records if r.ok and dict(r.params) == dict(cal.shapes.target)
    )
    spread = max(times[-1] - times[0] if times else 0.0, cal.estimate.timing.spread_s or 0.0)
    return Baseline(statistics.median(times) if times else None, spread)


def apply_and_validate(
    log: Log,
    session: Session,
    plan: Plan,
    target: Point,
    settings: Settings,
    before: Baseline = UNMEASURED,
) -> Tried:
    """Apply ``plan``, run a request at ``target`` (two when the first is slower), validate; undo
    unless every rank held.

    Every rank calls the same collectives whatever happens here (an apply that fails, or anything
    the validating request raises, counts as a failed validation), so ranks stay in step."""
    shared = str(session.device).startswith("cpu") and not session.counts_placement
    stuck: UndoError | None = None
    try:
        applied, local = _applied(log, session, plan, settings)
    except UndoError as exc:  # apply failed, and its own undo too: every rank learns it below
        log.add(StepName.APPLY, "failed", str(exc))
        applied, local, stuck = None, Validation(Failure.REQUEST_ERROR, f"apply: {exc}"), exc
    record: WarmupRecord | None = None
    try:
        if applied is None:
            settings.agreement.max_int(0)  # the ranks' "confirm?" (nothing applied here to run)
        else:
            local, record = _validated(
                log, session, applied, plan, target, before, shared, settings.agreement
            )
        return _agreed(log, applied, local, record, settings, stuck)
    except UndoError:  # the rollback itself failed: the caller stops serving
        raise
    except BaseException:  # a collective that fails: never leave the plan half in force
        if applied is not None:
            applied.undo(keep_pins=True)
        raise


def _applied(
    log: Log, session: Session, plan: Plan, settings: Settings
) -> tuple[Applied | None, Validation]:
    """``plan`` applied, or (None, the failure) when applying raised anything but a failed undo
    (``apply`` undid itself: nothing of the plan is left)."""
    session.hand_over(plan)  # the calibration's offloading off; the CPU counts the plan's
    try:
        applied = placed(log, session, plan, settings)
        session.streamed()  # a streamed component counted block by block, as the device holds it
    except UndoError:
        raise
    except KeyboardInterrupt:  # ``apply`` undid itself; the ranks stop together (``_agreed``)
        log.add(StepName.APPLY, "failed", "interrupted")
        return None, Validation(Failure.REQUEST_ERROR, "interrupted", interrupted=True)
    except Exception as exc:  # noqa: BLE001 - any failure while applying is a failed validation
        failure = raised("apply failed", exc)
        log.add(StepName.APPLY, "failed", str(exc), component=failure.failed_component)
        return None, failure
    kinds = dict(placement(plan))
    pins = f"; {show_bytes(applied.pinned_bytes)} pinned" if plan.pinned_bytes else ""
    pins += f" ({applied.pin_note})" if applied.pin_note else ""
    log.add(
        StepName.APPLY,
        "done",
        f"{len(kinds)} components placed{pins}",
        placement=kinds,
        pinned_bytes=applied.pinned_bytes,
    )
    return applied, Validation(Failure.NONE, "applied")


def placed(log: Log, session: Session, plan: Plan, settings: Settings) -> Applied:
    """``plan`` applied to ``session``'s pipeline, its pins placed for this worker in the run's
    pin state (``Log.pins``)."""
    device, offload = session.device, settings.offload_device
    return apply(plan, session.pipe, device, offload, pins=log.pins, owner=WORKER)


def raised(what: str, exc: BaseException) -> Validation:
    """An exception as a failed validation: out of memory (by its type or message) or a request
    error; a failed move names its component (a re-plan must leave it more)."""
    moved = exc if isinstance(exc, MoveError) else None
    oom = (
        moved.out_of_memory
        if moved is not None
        else is_out_of_memory(ErrorInfo.from_exception(exc))
    )
    first = (str(exc).splitlines() or [""])[0]
    return Validation(
        Failure.OUT_OF_MEMORY if oom else Failure.REQUEST_ERROR,
        f"{what}: {type(exc).__name__}: {first}",
        failed_component=None if moved is None else moved.component,
    )


def _validated(
    log: Log,
    session: Session,
    applied: Applied,
    plan: Plan,
    target: Point,
    before: Baseline,
    shared: bool,
    agreement: Agreement,
) -> tuple[Validation, WarmupRecord | None]:
    """The request's validation; one judged slower is confirmed on a second request (one slow
    request may be the machine, not the placement) and fails only when that one is slower too,
    judged on the faster of the two; a second that fails in memory fails as itself. When any
    rank confirms, every rank runs the second request (a pipeline split over the ranks runs its
    requests together), and a rank whose first held keeps it."""
    record, local = _request(log, session, applied, plan, target, shared)
    if record is not None:
        local = judge_speed(local, plan, record, before)
    if not agreement.max_int(int(local.failure is Failure.TOO_SLOW)):
        return local, record
    again, second = _request(log, session, applied, plan, target, shared)
    if local.failure is not Failure.TOO_SLOW or record is None:
        return local, record
    if again is None:
        return second, record
    if not second.holds:
        return judge_speed(second, plan, again, before), again
    faster = min((record, again), key=lambda r: r.duration_s)
    return judge_speed(second, plan, faster, before), faster


def _request(
    log: Log, session: Session, applied: Applied, plan: Plan, target: Point, shared: bool
) -> tuple[WarmupRecord | None, Validation]:
    """One validating request and its memory check; anything it raises (the placement then
    undone) is a failed validation without a record."""
    try:
        record = _measure(session, applied, target)
    except UndoError:
        raise
    except KeyboardInterrupt:  # the placement is off; the ranks stop together (``_agreed``)
        return None, Validation(Failure.REQUEST_ERROR, "interrupted", interrupted=True)
    except Exception as exc:  # noqa: BLE001 - a failed validation, never a half-applied plan
        return None, raised("the validating request failed", exc)
    log.records.append(record)
    return record, validate(plan, record, shared_memory=shared)


def _agreed(
    log: Log,
    applied: Applied | None,
    local: Validation,
    record: WarmupRecord | None,
    settings: Settings,
    stuck: UndoError | None = None,
) -> Tried:
    """The ranks' most cautious validation, recorded; the plan undone unless it holds, and every
    rank stopped when one's rollback failed or its request was interrupted."""
    worst = worst_failure(settings.agreement, local.failure)
    validation = local
    if worst is not local.failure:
        validation = attrs.evolve(
            local, failure=worst, reason=f"{local.reason}; another rank: {worst.value}"
        )
    log.add(
        StepName.VALIDATE,
        "holds" if validation.holds else validation.failure.value,
        validation.reason,
        phases=[
            {
                "target": c.target,
                "label": c.label,
                "predicted_bytes": c.predicted_bytes,
                "measured_bytes": c.measured_bytes,
                "usable_bytes": c.usable_bytes,
            }
            for c in validation.checks
        ],
        time=None if validation.speed is None else attrs.asdict(validation.speed),
    )
    if validation.holds:
        return Tried(applied, validation, record)
    roll_back_together(log, applied, local, settings.agreement, stuck)
    return Tried(None, validation, record)


def roll_back_together(
    log: Log,
    applied: Applied | None,
    local: Validation,
    agreement: Agreement,
    stuck: UndoError | None = None,
) -> None:
    """After an agreed failure: this rank's placement undone, then every rank stopped when one's
    rollback failed (this one: its ``UndoError`` raised) or its request was interrupted (this one:
    ``KeyboardInterrupt``). Every rank calls it at the same point."""
    if applied is not None:
        try:
            applied.undo(keep_pins=True)
        except UndoError as exc:
            stuck = exc
        else:
            log.add(
                StepName.ROLLBACK, "done", "every hook removed, every module back on its device"
            )
    mine = STUCK if stuck is not None else INTERRUPTED if local.interrupted else GOING_ON
    stop_together(agreement, mine)
    if stuck is not None:
        raise stuck
    if local.interrupted:
        raise KeyboardInterrupt


def _measure(session: Session, applied: Applied, target: Point) -> WarmupRecord:
    """One request under the placement; anything escaping it takes the placement off first."""
    try:
        record = session.run(target)  # never raises for a failed request: the record says
        applied.offload_all()
        session.recorder.backend.release_pool()
    except BaseException:
        applied.undo(keep_pins=True)
        raise
    return record


def enter_serving(log: Log, session: Session) -> object:
    """The warmup -> serving transition (pool and staging caches released, peak reset)."""
    monitor = session.recorder.end_warmup()
    report = monitor.report
    log.add(
        StepName.SERVING,
        "done",
        f"warmup memory released: {show_bytes(report.allocated_before)} -> "
        f"{show_bytes(report.allocated_after)} allocated",
        allocated_before=report.allocated_before,
        allocated_after=report.allocated_after,
        caches_released=report.caches_released,
    )
    return monitor


def shape_text(params: Point) -> str:
    """A point as the steps show it."""
    from calibration.plan.inputs import target_name

    return target_name(params)
