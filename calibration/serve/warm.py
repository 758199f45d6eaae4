"""Start a worker warm or cold: the stored calibration replayed when the fingerprint matches (no
probe runs), else calibrated again (the log says which part changed); then the lifecycle (plan,
apply, validate one request) and the state folder written for the next start."""

from __future__ import annotations

import importlib.metadata
import itertools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from attrs import define

from artifact.point import Point
from calibration.core.shapes import Shapes
from calibration.lifecycle.run import Outcome, run_lifecycle
from calibration.lifecycle.steps import Settings
from calibration.serve.state import Fingerprint, StaleState, StateFolder, component_digest
from runtime.record import WarmupRecord

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration
    from calibration.core.session import Session

log = logging.getLogger(__name__)


def fingerprint_of(session: Session, formulas: str, capacity: int | None) -> Fingerprint:
    """The session's fingerprint: its components' tensors, the formulas, versions, the device."""
    import torch

    from runtime.measure.diffusers_hooks import pipeline_modules

    components = {
        name: component_digest(itertools.chain(m.named_parameters(), m.named_buffers()))
        for name, m in sorted(pipeline_modules(session.pipe).items())
    }
    device = torch.device(session.device)
    kind = device.type
    if device.type == "cuda":
        kind = f"cuda {torch.cuda.get_device_name(device)}"
    return Fingerprint(
        components, formulas, torch.__version__, _version("diffusers"), kind, capacity
    )


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@define
class Started:
    """The lifecycle's outcome, and whether it started warm (else why not)."""

    outcome: Outcome
    warm: bool
    why: str  # why cold: no state, which parts changed, what was unreadable; "" when warm


def start(
    session: Session,
    points: Shapes,
    settings: Settings,
    state: StateFolder | None,
    fingerprint: Fingerprint,
) -> Started:
    """The lifecycle from the state folder's calibration when it matches, else from a new one;
    the folder rewritten afterwards (atomically) with what this start measured."""
    calibration, why = None, "no state folder"
    if state is not None:
        calibration, why = _stored(session, points, settings, state, fingerprint)
    if why:
        log.warning("calibrating: %s", why)
        if state is not None:
            state.forget_learned()
    outcome = run_lifecycle(session, points, settings, calibration=calibration)
    if state is not None and outcome.calibration is not None:
        _save(state, fingerprint, outcome)
    return Started(outcome, calibration is not None, why)


def _stored(
    session: Session,
    points: Shapes,
    settings: Settings,
    state: StateFolder,
    fingerprint: Fingerprint,
) -> tuple[Calibration | None, str]:
    try:
        stored = state.read()
        changed = stored.fingerprint.changes(fingerprint)
        if changed:
            return None, f"{', '.join(changed)} changed since the state folder was written"
        return replayed(session, points, settings, stored.records), ""
    except StaleState as exc:
        return None, f"the state folder {state.root} is not usable ({exc})"


def replayed(
    session: Session, points: Shapes, settings: Settings, records: Sequence[WarmupRecord]
) -> Calibration:
    """The calibration ``run_lifecycle`` would measure, from stored records instead of runs: each
    size the loop asks for is the next stored record (``StaleState`` at the first that differs)."""
    from calibration.calibrate.run import calibrate_session

    stored = iter(records)

    def run(params: Point) -> WarmupRecord:
        record = next(stored, None)
        if record is None or dict(record.params) != dict(params):
            raise StaleState("the stored records are not the sizes this calibration measures")
        return record

    with _replacing_run(session, run):
        calibration = calibrate_session(
            session,
            target=points.target,
            probe=points.probe,
            warmup=points.warmup,
            margin=settings.margin,
            repeat=settings.repeat,
            time_tolerance=None,  # as the lifecycle calibrates: time decides no placement
        )
    if next(stored, None) is not None:
        raise StaleState("the state folder holds more records than this calibration measures")
    return calibration


class _replacing_run:
    """``session.run`` answered by ``run`` inside the block (the session's own afterwards)."""

    def __init__(self, session: Session, run: object) -> None:
        self.session, self.run = session, run

    def __enter__(self) -> None:
        vars(self.session)["run"] = self.run

    def __exit__(self, *exc: object) -> None:
        vars(self.session).pop("run", None)


def _save(state: StateFolder, fingerprint: Fingerprint, outcome: Outcome) -> None:
    from calibration.calibrate.report import document
    from calibration.plan.report import document as plan_document

    cal = outcome.calibration
    assert cal is not None  # checked by the caller
    plan = plan_document(outcome.plan) if outcome.plan is not None else None
    try:
        state.write(fingerprint, cal.records, document(cal), plan)
    except OSError as exc:  # a worker serves without a state folder rather than not at all
        log.warning("the state folder %s was not written: %s", state.root, exc)
