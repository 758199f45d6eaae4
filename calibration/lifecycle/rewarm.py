"""The re-warm: one bounded request under the placement in force before serving, its outcome
agreed over the ranks like a validation's (a rank whose re-warm fails fails it for every rank).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from artifact.point import Point
from calibration.lifecycle.agree import worst_failure
from calibration.lifecycle.model import Failure, StepName, Validation
from calibration.lifecycle.steps import Log, raised, roll_back_together, shape_text
from calibration.lifecycle.validate import is_out_of_memory
from calibration.plan.apply import Applied, UndoError
from runtime.measure.distributed import LOCAL, Agreement
from runtime.record import WarmupRecord

if TYPE_CHECKING:
    from calibration.core.session import Session


def rewarm(
    log: Log,
    session: Session,
    applied: Applied,
    warmup: Point,
    agreement: Agreement = LOCAL,
    *,
    validated: bool = True,
) -> Validation:
    """One bounded request under the placement in force (its allocator state is serving's); its
    outcome agreed over the ranks (the most cautious), as a validation's. When it failed on any
    rank, every rank's ``validated`` placement is undone (``roll_back_together``); an unvalidated
    one (a fallback kept whatever its validation said) stays, unless a rank was interrupted."""
    try:
        record = session.run(warmup)
        applied.offload_all()
    except UndoError:
        raise
    except KeyboardInterrupt:
        local = Validation(Failure.REQUEST_ERROR, "interrupted", interrupted=True)
    except Exception as exc:  # noqa: BLE001 - a failed re-warm, agreed below like any other
        local = raised("the re-warm failed", exc)
    else:
        log.records.append(record)
        local = _rewarmed(record)
    worst = worst_failure(agreement, local.failure)
    if worst is not local.failure:
        local = attrs.evolve(
            local, failure=worst, reason=f"{local.reason}; another rank: {worst.value}"
        )
    shown = "" if local.holds else f": {local.reason}"
    log.add(StepName.REWARM, "done" if local.holds else "failed", f"at {shape_text(warmup)}{shown}")
    if not local.holds:
        undone = applied if validated or local.interrupted else None
        roll_back_together(log, undone, local, agreement)
    return local


def _rewarmed(record: WarmupRecord) -> Validation:
    """A re-warm's record as a validation: it held when the request succeeded."""
    if record.error is None:
        return Validation(Failure.NONE, "re-warmed")
    oom = is_out_of_memory(record.error)
    return Validation(
        Failure.OUT_OF_MEMORY if oom else Failure.REQUEST_ERROR,
        f"{record.error.type}: {record.error.message}",
    )
