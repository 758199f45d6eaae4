"""The worker the HTTP face serves with after the lifecycle: every admissible request on the
placement in force, measured by the serving monitor, one at a time; ``close`` undoes the plan and
flushes the state folder. Per-request admission and predictions (issue 40 items 1-3) replace this
one behind the same ``Worker`` protocol."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from artifact.point import Point
from calibration.errors import CalibrationError
from calibration.serve.answer import Answer, PhasePeak
from calibration.serve.state import StateFolder
from calibration.serve.warm import Started
from runtime import Pipeline

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from calibration.core.session import Session
    from runtime.measure.serving import ServingMonitor


class PlainWorker:
    """Serves on the lifecycle's placement (``Started``) until ``close``."""

    def __init__(
        self,
        session: Session,
        started: Started,
        defaults: Point,
        state: StateFolder | None,
        on_close: Callable[[], object] = lambda: None,
    ) -> None:
        outcome = started.outcome
        if not outcome.report.serving or outcome.monitor is None:
            raise CalibrationError(f"not serving: {outcome.report.verdict}")
        self.session, self.started, self.state = session, started, state
        self.monitor: ServingMonitor = outcome.monitor  # type: ignore[assignment]
        self._defaults = dict(defaults)
        self.closed, self.on_close = False, on_close

    @property
    def pipeline(self) -> Pipeline:
        return self.session.formulas

    @property
    def defaults(self) -> Point:
        return self._defaults

    def serve(self, params: Point) -> Answer:
        """Run one request; its peak: the monitor's highest since serving began."""
        from calibration.core.calls import reset_scheduler

        session = self.session
        start = time.perf_counter()
        with self.monitor.tracking():
            reset_scheduler(session.pipe)
            output = session.pipe(**session.kwargs_for(params))
        seconds = time.perf_counter() - start
        peak = self.monitor.peak().allocated
        return Answer("run", (PhasePeak("serving", None, peak),), seconds, output)

    def close(self) -> None:
        """Undo the plan's hooks (once) and write the state folder's records."""
        if self.closed:
            return
        self.closed = True
        applied = self.started.outcome.applied
        if applied is not None:
            applied.undo()
        log.info("closed: every hook removed, every module back on its device")
        if self.state is not None:
            records = self.started.outcome.records
            self.state.flush_served(records)
            log.info("closed: %d records written to %s", len(records), self.state.root)
        self.on_close()
