"""The one entry point a serving worker (and `dslc plan --validate`) calls: ``run_lifecycle``.

bounded warmup -> probes -> estimates -> plan -> apply -> validate -> (roll back -> re-plan with
the measured phases -> apply -> validate)* -> fallback -> re-warm -> serving, as far as the mode
goes (docs/planning.md, "The lifecycle"). Every step is recorded in the report; every record
measured is kept, whatever fails later; no plan is ever left half-applied.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import attrs

from calibration.core.shapes import Shapes
from calibration.errors import CalibrationError
from calibration.lifecycle.agree import cautious_bounds, device_kind, plan_ranks
from calibration.lifecycle.bounded import RankError, RanksStopped, bounded, default_timeout
from calibration.lifecycle.ending import Outcome, finish, not_calibrated, stuck
from calibration.lifecycle.model import (
    NO_PLAN_VALIDATES,
    NOTHING_FITS,
    OK,
    REFUSED,
    Baseline,
    Failure,
    Mode,
    StepName,
    Validation,
)
from calibration.lifecycle.rewarm import rewarm
from calibration.lifecycle.speed import drifted, still_slower
from calibration.lifecycle.steps import (
    Log,
    Settings,
    Tried,
    apply_and_validate,
    baseline,
    calibration_steps,
    enter_serving,
    placed,
    placement,
    plan_inputs,
    plan_step,
)
from calibration.lifecycle.validate import (
    moved_bounds,
    planned_bounds,
    revised_bounds,
    with_bounds,
)
from calibration.plan.apply import Applied, UndoError
from calibration.plan.costs import MeasuredCosts, placement_key
from calibration.plan.model import Component, Device, Plan, Target
from calibration.plan.pinning import PinBook
from calibration.plan.solver import most_conservative
from runtime.measure.distributed import LOCAL

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration
    from calibration.core.session import Session

log = logging.getLogger(__name__)


@attrs.frozen
class _Run:
    """What every step after calibration reads, passed once: the log it writes, the mode, the
    pipeline's session and shapes, the settings (rank agreement bounded), the planner's inputs
    and the calibration they came from."""

    book: Log
    mode: Mode
    session: Session
    points: Shapes
    settings: Settings
    components: tuple[Component, ...]
    targets: tuple[Target, ...]
    cal: Calibration

    def finish(
        self, plan: Plan | None, applied: Applied | None, serving: bool, verdict: str, status: int
    ) -> Outcome:
        """`_finish` on this run's log, mode and calibration."""
        return finish(self.book, self.mode, plan, applied, serving, verdict, self.cal, status)


def run_lifecycle(
    session: Session,
    points: Shapes,
    settings: Settings,
    *,
    calibration: Calibration | None = None,
    pins: PinBook | None = None,
) -> Outcome:
    """Take ``session``'s pipeline from warmup to serving as far as ``settings.mode`` says.

    ``calibration``: one already measured on this pipeline (its steps are marked ``given``).
    ``pins``: the pin state this worker's placements share with other owners (None: its own).
    Never raises for a failed request, plan or validation: the report says what happened."""
    mode = settings.mode
    book = Log(pins=PinBook() if pins is None else pins)
    try:
        cal = calibration if calibration is not None else _calibrate(session, points, settings)
    except CalibrationError as exc:
        book.add(StepName.ESTIMATE, "failed", str(exc))
        return not_calibrated(book, mode, exc)
    calibration_steps(book, cal, given=calibration is not None)
    if mode is Mode.OFF:
        return finish(book, mode, None, None, False, "measured only (mode off)", cal=cal)
    components, targets = plan_inputs(cal, settings.whole)
    timeout = settings.rank_timeout_s or default_timeout(r.duration_s for r in cal.records)
    settings = attrs.evolve(settings, agreement=bounded(settings.agreement, timeout))
    run = _Run(book, mode, session, points, settings, components, targets, cal)
    try:
        return _plan(run)
    except UndoError as exc:  # hooks left on some components: never serve on that
        return stuck(book, mode, exc, cal)
    except RanksStopped as exc:  # another rank's rollback failed or it was interrupted
        book.add(StepName.REFUSE, "refused", str(exc))
        return finish(book, mode, None, None, False, f"not serving: {exc}", cal, REFUSED)
    except RankError as exc:  # a rank lost or late: this rank goes on alone, as its mode says
        return _alone(run, exc)
    except Exception as exc:  # reported; the plan was undone where it failed
        log.debug("lifecycle failed", exc_info=True)
        book.add(StepName.ERROR, "failed", f"{type(exc).__name__}: {exc}")
        verdict = f"the lifecycle failed, not serving: {type(exc).__name__}: {exc}"
        return finish(book, mode, None, None, False, verdict, cal, REFUSED)
    except BaseException:  # an interrupt: no placement is in force, nor any pin of it
        book.unpin()
        raise


def _plan(run: _Run) -> Outcome:
    """Plan over the ranks, then (mode apply or strict) apply, validate, re-plan, fall back."""
    settings = run.settings
    kind = device_kind(str(run.session.device), settings.device)  # each rank on its own device
    targets = cautious_bounds(settings.agreement, run.targets, kind)
    plan, ranks = plan_ranks(settings.agreement, run.components, targets, settings.device)
    plan_step(run.book, StepName.PLAN, plan, "the estimates" + (f" ({ranks})" if ranks else ""))
    if run.mode is Mode.PLAN:
        verdict = "planned, nothing applied (mode plan)"
        return finish(run.book, run.mode, plan, None, False, verdict, run.cal)
    return _apply(attrs.evolve(run, targets=targets), plan)


def _alone(run: _Run, exc: RankError) -> Outcome:
    """A collective that failed or timed out (no plan is in force: it was undone where it
    failed): strict stops serving; apply falls back to the most conservative placement on this
    rank's own measurements, unvalidated (no collective is waited for again); plan plans nothing."""
    book = run.book
    book.add(StepName.RANKS, "failed", str(exc))
    if run.mode is Mode.PLAN:
        return run.finish(None, None, True, f"not planned: {exc}", NOTHING_FITS)
    if run.mode is Mode.STRICT:
        book.add(StepName.REFUSE, "refused", "every hook removed; the pipeline is as it was")
        return run.finish(None, None, False, f"not serving: {exc}", REFUSED)
    fallback = most_conservative(run.components, run.targets, run.settings.device)
    plan_step(
        book, StepName.FALLBACK, fallback, "the ranks failed; alone, the most conservative one"
    )
    failed = Tried(None, Validation(Failure.REQUEST_ERROR, str(exc)), None)
    return _serve(run, fallback, failed, together=False)


def _calibrate(session: Session, points: Shapes, settings: Settings) -> Calibration:
    from calibration.calibrate.run import calibrate_session

    return calibrate_session(
        session,
        target=points.target,
        probe=points.probe,
        warmup=points.warmup,
        margin=settings.margin,
        repeat=settings.repeat,
        time_tolerance=None,  # time decides no placement
    )


def _apply(run: _Run, plan: Plan) -> Outcome:
    """Apply and validate, re-plan on failure up to ``max_replans`` times, then fall back."""
    book, session, settings, targets = run.book, run.session, run.settings, run.targets
    request = run.points.target
    tried: set[str] = set()
    slow: set[str] = set()  # placements rolled back as slower (the machine was not)
    costs = MeasuredCosts()  # and what each was measured above its prediction
    why = f"no plan held in {settings.max_replans + 1} tries"
    device = settings.device
    before = attrs.evolve(baseline(run.cal), link_bytes_per_s=device.bandwidth_bytes_per_s)
    for attempt in range(settings.max_replans + 1):
        stop = _why_stop(settings, plan, targets, device, tried, slow, before, attempt)
        if stop:
            why = stop
            break
        result = apply_and_validate(book, session, plan, request, settings, before)
        if result.validation.failure is Failure.TOO_SLOW:
            now = drifted(book, session, request, settings, result, before)
            if now is not None:  # the machine slowed, not the placement: the plan holds,
                before = now  # applied again and its memory validated; its time is recorded,
                unjudged = attrs.evolve(now, judged=False)  # not judged: a machine still
                result = apply_and_validate(book, session, plan, request, settings, unjudged)
                # slowing would make the plan slower than the request just before it
            speed = result.validation.speed
            if result.validation.failure is Failure.TOO_SLOW and speed is not None:
                slow.add(placement_key(plan))
                costs = costs.learn(plan, speed.measured_s, speed.predicted_s)
        if result.validation.holds:
            return _serve(run, plan, result)
        targets, device = _revised(session, settings, targets, plan, result)
        if attempt < settings.max_replans:
            plan, ranks = plan_ranks(settings.agreement, run.components, targets, device)
            plan = costs.charge(plan)  # the same placement keeps what it was measured to cost
            learnt = f"the measured {_what(result)} (try {attempt + 2})"
            plan_step(book, StepName.REPLAN, plan, learnt + (f"; {ranks}" if ranks else ""))
    fallback = costs.charge(most_conservative(run.components, targets, device))
    plan_step(book, StepName.FALLBACK, fallback, f"{why}; the most conservative placement")
    result = apply_and_validate(book, session, fallback, request, settings, before)
    if result.validation.holds:
        return _serve(run, fallback, result)
    if run.mode is Mode.STRICT:
        book.add(StepName.REFUSE, "refused", "every hook removed; the pipeline is as it was")
        verdict = "NO PLAN VALIDATES: strict mode refuses to serve"
        return run.finish(None, None, False, verdict, REFUSED)
    return _serve(run, fallback, result)


def _why_stop(
    settings: Settings,
    plan: Plan,
    targets: tuple[Target, ...],
    device: Device,
    tried: set[str],
    slow: set[str],
    before: Baseline,
    attempt: int,
) -> str:
    """Why no rank tries ``plan`` (agreed: every rank stops together, a rank alone would hang the
    rest); "" to try it."""
    agree = settings.agreement
    if agree.max_int(int(not plan.feasible)):
        why = "nothing fits" + (" by the measured phases" if attempt else "")
        return why + ("" if not plan.feasible else " on another rank")
    again = placement_key(plan) in slow and still_slower(plan, before)
    if agree.max_int(int(again)):  # never again unless predicted no slower than before
        return "the re-plan repeats a placement rolled back as slower"
    key = f"{placement_key(plan)}|{planned_bounds(targets)}|{device.bandwidth_bytes_per_s}"
    if agree.max_int(int(key in tried)):  # the same placement and bounds would fail again
        return "the re-plan repeats a plan that failed"
    tried.add(key)
    return ""


def _what(result: Tried) -> str:
    return "time" if result.validation.failure is Failure.TOO_SLOW else "phases"


def _revised(
    session: Session, settings: Settings, targets: tuple[Target, ...], plan: Plan, result: Tried
) -> tuple[tuple[Target, ...], Device]:
    """What a re-plan learns from a failed validation (agreed over the ranks): each phase's
    measured bound, on the ranks' slowest link. A slow request teaches no slower link: its time
    above the prediction is the placement's measured cost (``MeasuredCosts``), counted once."""
    failed = result.validation
    if result.record is not None:
        bounds = revised_bounds(plan, failed, result.record, shared_memory=_shared(session))
    elif failed.failure is Failure.OUT_OF_MEMORY and failed.failed_component is not None:
        bounds = moved_bounds(plan, targets, failed.failed_component)
    else:
        bounds = planned_bounds(targets)
    kind = device_kind(str(session.device), settings.device)
    targets = cautious_bounds(settings.agreement, with_bounds(targets, bounds), kind)
    link = plan.device.bandwidth_bytes_per_s
    agreed = -settings.agreement.max_int(-max(1, int(link)))  # every rank calls it
    device = attrs.evolve(plan.device, bandwidth_bytes_per_s=float(agreed))
    return targets, device


def _shared(session: Session) -> bool:
    return str(session.device).startswith("cpu") and not session.counts_placement


def _serve(run: _Run, plan: Plan, result: Tried, *, together: bool = True) -> Outcome:
    """Keep the placement (the fallback re-applied, unvalidated, when it failed too), re-warm,
    serve; a fallback that cannot be applied leaves the pipeline as it was, and the worker does
    not serve (never with no placement). ``together``: the ranks agree on that (every rank
    refuses when one cannot apply it); False for a rank that went on alone."""
    book, session, settings = run.book, run.session, run.settings
    validated = result.validation.holds
    applied = result.applied
    if applied is None:
        applied = _reapply(book, session, settings, plan)
        if together and _any_rank(settings, applied, applied is None) and applied is not None:
            applied.undo(keep_pins=True)
            applied = None
            book.add(StepName.APPLY, "failed", "another rank's fallback cannot be applied")
        if applied is None:
            why = book.steps[-1].detail
            verdict = f"NO PLAN VALIDATES: the fallback cannot be applied, not serving: {why}"
            return run.finish(None, None, False, verdict, REFUSED)
    agreement = settings.agreement if together else LOCAL  # alone: no collective again
    try:
        warmed = rewarm(book, session, applied, run.points.warmup, agreement, validated=validated)
        monitor = enter_serving(book, session) if warmed.holds or not validated else None
    except UndoError:  # the re-warm's rollback failed: the caller stops serving
        raise
    except BaseException:  # never serve, nor fail, with a plan half in force
        applied.undo(keep_pins=True)
        raise
    if monitor is None:  # a validated placement's re-warm failed on some rank: undone on all
        return _rewarm_failed(run, warmed, together)
    tries = sum(s.name == StepName.VALIDATE for s in book.steps)
    which = "the fallback" if _is_fallback(book) else "the plan"
    verdict = (
        f"{which} held on a measured request (validation {tries})"
        if validated
        else "NO PLAN VALIDATES: serving on the most conservative placement, unvalidated"
    )
    status = OK if validated else NO_PLAN_VALIDATES
    outcome = run.finish(plan, applied, True, verdict, status)
    outcome.monitor = monitor
    return outcome


def _rewarm_failed(run: _Run, warmed: Validation, together: bool) -> Outcome:
    """A validated placement's re-warm that failed on a rank (every rank's placement undone,
    ``rewarm``): apply falls back to the most conservative placement, unvalidated, re-warmed in
    turn and kept as any unvalidated fallback; strict refuses to serve. Every rank decides alike
    (the failure is agreed)."""
    book = run.book
    if run.mode is Mode.APPLY:
        fallback = most_conservative(run.components, run.targets, run.settings.device)
        why = f"the re-warm failed ({warmed.failure.value}); the most conservative placement"
        plan_step(book, StepName.FALLBACK, fallback, why)
        return _serve(run, fallback, Tried(None, warmed, None), together=together)
    book.add(StepName.REFUSE, "refused", "every hook removed; the pipeline is as it was")
    verdict = f"not serving: the re-warm failed: {warmed.reason}"
    return run.finish(None, None, False, verdict, REFUSED)


def _reapply(book: Log, session: Session, settings: Settings, plan: Plan) -> Applied | None:
    """The fallback applied again, kept unvalidated; None when it cannot be (the log says why)."""
    session.hand_over(plan)
    try:
        applied = placed(book, session, plan, settings)
        session.streamed()
    except UndoError:
        raise
    except Exception as exc:  # noqa: BLE001 - never serve with no placement
        book.add(StepName.APPLY, "failed", f"the fallback, kept unvalidated: {exc}")
        return None
    book.add(
        StepName.APPLY, "done", "the fallback, kept unvalidated", placement=dict(placement(plan))
    )
    return applied


def _any_rank(settings: Settings, applied: Applied | None, failed: bool) -> bool:
    """Whether any rank ``failed`` (every rank calls it at the same point); a collective that
    fails takes this rank's placement off before the ``RankError`` leaves."""
    try:
        return bool(settings.agreement.max_int(int(failed)))
    except RankError:
        if applied is not None:
            applied.undo(keep_pins=True)
        raise


def _is_fallback(book: Log) -> bool:
    """Whether the placement in force is the fallback (the log's state, not its step names)."""
    return book.placed_by is StepName.FALLBACK
