"""Speed judged against the time before, across re-plans, and against the machine's own drift.

A placement rolled back as ``slower`` may be the machine, not the placement: ``drifted`` runs one
request with the plan undone, and when that one is as slow (the placement within 5 % of it, or
within the validation's own allowance for noise, as ``SpeedCheck.too_slow`` judges) the
machine slowed down: the plan holds, applied again with its memory validated and its time
recorded against the new time before but not judged (a machine that slows with every request
would make any request slower than the one before it). A placement that was slower is never
applied again unless its prediction says it is no longer slower than before (``still_slower``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from artifact.point import Point
from calibration.lifecycle.model import SLOWER_THAN_BEFORE, Baseline, StepName, time_allowance
from calibration.plan.model import Plan

if TYPE_CHECKING:
    from calibration.core.session import Session
    from calibration.lifecycle.steps import Log, Settings, Tried


def drifted(
    log: Log, session: Session, target: Point, settings: Settings, slow: Tried, before: Baseline
) -> Baseline | None:
    """After a placement judged slower and rolled back: one request at ``target`` with no plan.
    As slow as the placement's (every rank's, agreed): the machine slowed, and the new time
    before; else None (the placement is slower)."""
    record = session.run(target)  # never raises for a failed request: the record says
    log.records.append(record)
    speed = slow.validation.speed
    as_slow = (  # the placement is slower only as ``too_slow`` judges it: beyond 5 % and the noise
        record.ok
        and speed is not None
        and (
            speed.measured_s <= record.duration_s * (1 + SLOWER_THAN_BEFORE)
            or speed.measured_s
            <= record.duration_s + time_allowance(record.duration_s, speed.spread_s)
        )
    )
    log.add(
        StepName.UNPLANNED,
        "as slow" if as_slow else "faster",
        f"one request with the plan undone: {record.duration_s:.3g} s"
        + (
            "; the machine slowed down, not the placement: the time before is updated"
            if as_slow
            else "; the placement is slower"
        ),
        measured_s=record.duration_s,
    )
    if settings.agreement.max_int(int(not as_slow)):  # every rank's machine, or none
        return None
    return attrs.evolve(before, previous_s=record.duration_s)


def still_slower(plan: Plan, before: Baseline) -> bool:
    """Whether a placement once rolled back as slower is predicted slower than before still
    (unknown: it is)."""
    predicted = plan.predicted_seconds
    if predicted is None or before.previous_s is None:
        return True
    return predicted > before.previous_s * (1 + SLOWER_THAN_BEFORE)
