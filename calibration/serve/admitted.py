"""The worker the HTTP face serves with: every request through admission (``admission.admit``,
once, before any work) on the placement the lifecycle validated.

RUN: under the placement in force. REPLACE: the placement in force taken off, the request's plan
applied (as the lifecycle applies one), the request run, and the placement in force put back
whatever happened. REFUSE: ``RequestRefused`` raised, nothing run (the app answers 422 naming the
largest admissible values). Each answer sets every phase's predicted bound beside the request's
measured peak (the serving monitor's backend, read per request). ``close`` undoes the hooks and
flushes the state folder.

The whole request's peak also counts what runs outside every phase (the output's post-processing:
8 KiB over the bound at the tiny FLUX's validated target), so it marks no drift: drift is per
phase, once the recorder measures served requests by phase.

This adapter stands in for h-predict's ``serve/worker.py`` (per-phase measurement while serving
needs its recorder change) until that lands; the app sees both through ``answer.Worker``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from artifact.point import Point
from artifact.spelling import point_text
from artifact.units import show_bytes
from calibration.errors import CalibrationError
from calibration.plan.model import Device, Plan
from calibration.serve.admission import DecisionKind, ShapePlanner, admit
from calibration.serve.answer import Answer, PhasePeak
from calibration.serve.predictor import RequestPrediction, RequestPredictor, from_calibration
from calibration.serve.state import StateFolder
from calibration.serve.warm import Started
from runtime import Pipeline

if TYPE_CHECKING:
    from calibration.core.session import Session
    from calibration.plan.apply import Applied
    from runtime.measure.serving import ServingMonitor

log = logging.getLogger(__name__)
REQUEST = "request"  # the answer's row of the whole request: its bound and its measured peak


class AdmittedWorker:
    """Serves the lifecycle's session (``Started``) through admission until ``close``."""

    def __init__(
        self,
        session: Session,
        started: Started,
        defaults: Point,
        state: StateFolder | None,
        device: Device,
        on_close: Callable[[], object] = lambda: None,
    ) -> None:
        outcome = started.outcome
        if not outcome.report.serving or outcome.monitor is None or outcome.calibration is None:
            raise CalibrationError(f"not serving: {outcome.report.verdict}")
        self.session, self.started, self.state, self.device = session, started, state, device
        self.monitor: ServingMonitor = outcome.monitor  # type: ignore[assignment]
        self.predictor: RequestPredictor = from_calibration(outcome.calibration, session.formulas)
        self.planner = ShapePlanner()
        self.plan: Plan | None = outcome.plan
        self.applied: Applied | None = outcome.applied
        self._defaults = dict(defaults)
        self.closed, self.on_close = False, on_close

    @property
    def pipeline(self) -> Pipeline:
        return self.session.formulas

    @property
    def defaults(self) -> Point:
        return self._defaults

    def serve(self, params: Point) -> Answer:
        """Admit, then run under the placement admission chose (see the module docstring)."""
        decision = admit(self.predictor, params, self.plan, self.device, self.planner)
        if decision.kind is DecisionKind.REFUSE:
            assert decision.refused is not None
            raise decision.refused
        assert decision.prediction is not None
        if decision.plan is not None:
            with self._replaced(decision.plan) as applied:
                peak, seconds, output = self._run(params, applied)
        else:
            peak, seconds, output = self._run(params, self.applied)
        return self._answer(decision.kind, decision.prediction, peak, seconds, output)

    def _run(self, params: Point, applied: Applied | None) -> tuple[int, float, object]:
        """One request: its device peak (the monitor's window kept whole), time and output."""
        from calibration.core.calls import reset_scheduler

        session, backend = self.session, self.monitor.backend
        self.monitor.peak()  # folds the serving window: the backend's peak starts afresh here
        start = time.perf_counter()
        try:
            with self.monitor.tracking():
                reset_scheduler(session.pipe)
                output = session.pipe(**session.kwargs_for(params))
                peak = backend.peak_allocated()
        finally:
            if applied is not None:
                applied.offload_all()
            self.monitor.peak()
        return peak, time.perf_counter() - start, output

    def _answer(
        self,
        kind: DecisionKind,
        prediction: RequestPrediction,
        peak: int,
        seconds: float,
        output: object,
    ) -> Answer:
        bound = _request_bound(prediction, self._host_copies())
        if peak > bound:  # told, not yet acted on: see the module docstring
            log.info(
                "request %s measured %s over the request's bound %s (outside the phases?)",
                point_text(prediction.params),
                show_bytes(peak),
                show_bytes(bound),
            )
        rows = [PhasePeak(REQUEST, bound, peak)]
        rows += [PhasePeak(p.label, p.bound_bytes, None) for p in prediction.phases]
        replaced = kind is DecisionKind.REPLACE
        return Answer(kind.value, tuple(rows), seconds, output, replanned=replaced)

    def _host_copies(self) -> int | None:
        """Every weight (the tracker's count on a CPU device that is also the host), or None
        where the device counts only what it holds."""
        if str(self.session.device).startswith("cpu") and not self.session.counts_placement:
            return sum(self.predictor.weights.values())
        return None

    @contextlib.contextmanager
    def _replaced(self, plan: Plan) -> Iterator[Applied]:
        """``plan`` in force for the block; the placement in force before it, after."""
        if self.applied is not None:
            self.applied.undo()
            self.applied = None
        try:
            applied = self._put_on(plan)
            try:
                yield applied
            finally:
                applied.undo()
        finally:
            self.applied = self._put_on(self.plan) if self.plan is not None else None

    def _put_on(self, plan: Plan) -> Applied:
        from calibration.plan.apply import apply

        self.session.hand_over(plan)
        applied = apply(plan, self.session.pipe, device=self.session.device, offload_device="cpu")
        self.session.streamed()
        return applied

    def close(self) -> None:
        """Undo the plan's hooks (once) and write the state folder's records."""
        if self.closed:
            return
        self.closed = True
        if self.applied is not None:
            self.applied.undo()
            self.applied = None
        log.info("closed: every hook removed, every module back on its device")
        if self.state is not None:
            records = self.started.outcome.records
            self.state.flush_served(records)
            log.info("closed: %d records written to %s", len(records), self.state.root)
        self.on_close()


def _request_bound(prediction: RequestPrediction, every_weight: int | None) -> int:
    """The request's bound as its measured peak counts: the largest phase bound; where the device
    counts every weight (``every_weight``), each phase's bound plus the host copies of what the
    placement keeps off the device then (the lifecycle's validation takes them out per phase)."""
    if every_weight is None:
        return prediction.bound_bytes
    return max(p.bound_bytes + every_weight - p.weights_bytes for p in prediction.phases)
