"""How a lifecycle ends: its ``Outcome`` (the report, every record, the plan and hooks in force)
and the endings that need no more of the pipeline (``finish``, a failed rollback, a calibration
that stopped).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
from attrs import define

from calibration.lifecycle.model import (
    NO_PLAN_VALIDATES,
    NOTHING_FITS,
    OK,
    REFUSED,
    ROLLBACK_FAILED,
    Mode,
    Report,
    StepName,
)
from calibration.lifecycle.steps import Log, placement
from calibration.plan.apply import Applied, UndoError
from calibration.plan.model import Plan
from runtime.record import WarmupRecord

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration
    from calibration.errors import CalibrationError


@define
class Outcome:
    """What the worker serves with: the report, every record, the plan and hooks in force."""

    report: Report
    records: tuple[WarmupRecord, ...]
    plan: Plan | None = None
    applied: Applied | None = None  # ``applied.undo()`` takes the placement off again
    monitor: object | None = None  # the ``ServingMonitor`` once serving began
    calibration: Calibration | None = None


def stuck(book: Log, mode: Mode, exc: UndoError, cal: Calibration) -> Outcome:
    """A rollback that failed: the worker stops serving, and says what each component kept."""
    left = tuple(sorted(exc.left.items()))
    book.add(
        StepName.ROLLBACK,
        "failed",
        str(exc),
        failures=dict(exc.failures),
        left_in_place=dict(left),
    )
    shown = "; ".join(f"{n}: {what}" for n, what in left)
    verdict = f"ROLLBACK FAILED: not serving; left in place: {shown}"
    outcome = finish(book, mode, None, None, False, verdict, cal, ROLLBACK_FAILED)
    outcome.report = attrs.evolve(outcome.report, left_in_place=left)
    return outcome


def not_calibrated(book: Log, mode: Mode, exc: CalibrationError) -> Outcome:
    """A calibration that stopped: nothing to plan from, so apply and strict do not serve (never
    with no placement; exit 5), plan plans nothing (exit 1), off serves unplanned as ever."""
    verdict = f"not calibrated: {exc}"
    if mode in (Mode.APPLY, Mode.STRICT):
        book.add(StepName.REFUSE, "refused", "nothing applied; the pipeline is as it was")
        return finish(book, mode, None, None, False, f"{verdict}; not serving", None, REFUSED)
    status = NOTHING_FITS if mode is Mode.PLAN else None
    return finish(book, mode, None, None, True, verdict, None, status)


def finish(
    book: Log,
    mode: Mode,
    plan: Plan | None,
    applied: Applied | None,
    serving: bool,
    verdict: str,
    cal: Calibration | None = None,
    status: int | None = None,
) -> Outcome:
    """The report and the outcome; ``status`` defaults from the mode and the plan. Ending with
    no placement in force, the pins kept across its rollbacks are released."""
    if applied is None:
        book.unpin()
    validated = status == OK and mode in (Mode.APPLY, Mode.STRICT)
    if status is None:
        if mode in (Mode.APPLY, Mode.STRICT):
            status = REFUSED if mode is Mode.STRICT else NO_PLAN_VALIDATES
        else:
            status = NOTHING_FITS if plan is not None and not plan.feasible else OK
        serving = serving or mode is not Mode.STRICT  # fail open: serve unplanned
    shown = placement(plan) if plan is not None and plan.feasible else ()
    report = Report(
        mode, tuple(book.steps), validated, serving, shown if applied else (), status, verdict
    )
    return Outcome(report, tuple(book.records), plan, applied, None, cal)
