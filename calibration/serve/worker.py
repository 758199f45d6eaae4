"""A serving worker's requests, one at a time, on a session the lifecycle validated.

``Worker.serve(params)``: admission first (``admission.admit``: nothing runs for a refused
request, ``RequestRefused`` raised); a REPLACE takes the placement in force off, applies the
request's plan (``calibration.plan.apply``, as the lifecycle does), runs, and puts the placement in
force back whatever happened; the request is recorded (``WarmupRecorder.served_request``) and each
phase's measured peak set beside its predicted bound (``Served``). A request that fails while it
runs (it raised mid-denoise, or ran out of memory) leaves the placement as before it and raises
``RequestFailed``. Synchronous: the HTTP layer serializes calls through its queue.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from attrs import field, frozen

from artifact.point import Point
from calibration.errors import CalibrationError
from calibration.lifecycle.validate import is_out_of_memory
from calibration.plan.model import Device, Plan
from calibration.serve.admission import Decision, DecisionKind, ShapePlanner, admit
from calibration.serve.predictor import RequestPrediction, RequestPredictor, from_calibration
from runtime.estimate.peaks import phase_label
from runtime.record import WarmupRecord

if TYPE_CHECKING:
    from calibration.core.session import Session
    from calibration.lifecycle.run import Outcome
    from calibration.plan.apply import Applied


class RequestFailed(CalibrationError):
    """A served request failed while it ran (``out_of_memory``: an allocation failed); the
    pipeline's placement is as before the request. ``record`` is what was measured."""

    def __init__(self, message: str, record: WarmupRecord | None, *, out_of_memory: bool) -> None:
        super().__init__(message)
        self.record = record
        self.out_of_memory = out_of_memory


class NotServing(CalibrationError):
    """A worker asked of a lifecycle that did not end serving (its verdict says why)."""


@frozen
class PhaseMeasured:
    """One phase of a served request: its predicted bound and its measured device peak."""

    label: str
    predicted_bytes: int  # the bound, weights under the placement included
    measured_bytes: int | None  # None: the request did not reach this phase

    @property
    def within(self) -> bool:
        """Measured at or under its bound (or not reached)."""
        return self.measured_bytes is None or self.measured_bytes <= self.predicted_bytes


@frozen
class Served:
    """One served request: the decision, what was predicted, and what was measured."""

    decision: Decision
    prediction: RequestPrediction
    record: WarmupRecord = field(repr=False)
    phases: tuple[PhaseMeasured, ...]
    seconds: float  # the request as measured (on the session's clock)
    transfer_s: float  # REPLACE: the request's plan's predicted transfer; else the placement's
    placing_s: float = 0.0  # REPLACE: measured re-placing (undo, apply, undo, apply again)

    @property
    def peak_bytes(self) -> int:
        """The largest measured phase peak (the device's, host copies out)."""
        return max((p.measured_bytes or 0 for p in self.phases), default=0)


@frozen
class _Unplanned:
    """No placement (``Session.hand_over`` reads ``placements``)."""

    placements: tuple[()] = ()


_UNPLANNED = _Unplanned()


class Worker:
    """One pipeline serving requests under a placement, re-placed per request when admission
    says so."""

    def __init__(
        self,
        session: Session,
        predictor: RequestPredictor,
        device: Device,
        plan: Plan | None,
        applied: Applied | None,
        *,
        planner: ShapePlanner | None = None,
        offload_device: str = "cpu",
    ) -> None:
        self.session, self.predictor, self.device = session, predictor, device
        self.plan, self.applied = plan, applied
        self.planner = planner or ShapePlanner()
        self.offload_device = offload_device

    @classmethod
    def after(cls, outcome: Outcome, session: Session, device: Device) -> Worker:
        """The worker of a lifecycle that ended serving (its calibration, plan and hooks)."""
        if not outcome.report.serving or outcome.calibration is None or outcome.monitor is None:
            raise NotServing(
                f"the lifecycle did not enter serving (mode {outcome.report.mode}): "
                f"{outcome.report.verdict}"
            )
        predictor = from_calibration(outcome.calibration, session.formulas)
        return cls(session, predictor, device, outcome.plan, outcome.applied)

    def serve(self, params: Point) -> Served:
        """One request (see the module docstring)."""
        decision = admit(self.predictor, params, self.plan, self.device, self.planner)
        if decision.kind is DecisionKind.REFUSE:
            assert decision.refused is not None
            raise decision.refused
        assert decision.prediction is not None
        clock, placing = self.session.recorder.clock, 0.0
        if decision.kind is DecisionKind.REPLACE:
            assert decision.plan is not None
            start = clock()
            with self._replaced(decision.plan) as applied:
                record = self._run(params, applied)
            placing = max(0.0, clock() - start - record.duration_s)
        else:
            record = self._run(params, self.applied)
        self._raise_failed(record)
        prediction = decision.prediction
        transfer = decision.transfer_s if decision.plan is not None else prediction.transfer_s
        phases = self._measured(prediction, record)
        return Served(decision, prediction, record, phases, record.duration_s, transfer, placing)

    def _run(self, params: Point, applied: Applied | None) -> WarmupRecord:
        """One recorded request; afterwards nothing offloaded stays on the device."""
        record = self.session.run(params, served=True)
        if applied is not None:
            applied.offload_all()
        self.session.recorder.backend.release_pool()
        return record

    @contextlib.contextmanager
    def _replaced(self, plan: Plan) -> Iterator[Applied]:
        """``plan`` in force for the block; the placement in force before it, after."""
        self._take_off()
        try:
            applied = self._put_on(plan)
        except Exception as exc:
            self.applied = self._put_on(self.plan) if self.plan is not None else None
            raise RequestFailed(
                f"the request's placement could not be applied: {exc}", None, out_of_memory=False
            ) from exc
        try:
            yield applied
        finally:
            applied.undo()
            self.applied = self._put_on(self.plan) if self.plan is not None else None
            if self.plan is None:  # unplanned: the tracker counts every weight again
                self.session.hand_over(_UNPLANNED)
                self.session.streamed()

    def _take_off(self) -> None:
        if self.applied is not None:
            self.applied.undo()
            self.applied = None

    def _put_on(self, plan: Plan | None) -> Applied:
        from calibration.plan.apply import apply

        assert plan is not None
        self.session.hand_over(plan)
        applied = apply(
            plan, self.session.pipe, device=self.session.device, offload_device=self.offload_device
        )
        self.session.streamed()
        return applied

    def _raise_failed(self, record: WarmupRecord) -> None:
        if record.error is None:
            return
        oom = is_out_of_memory(record.error)
        what = "ran out of memory" if oom else "failed"
        raise RequestFailed(
            f"the request {what} ({record.error.type}: {record.error.message}); the placement "
            "is as before it",
            record,
            out_of_memory=oom,
        )

    def _measured(
        self, prediction: RequestPrediction, record: WarmupRecord
    ) -> tuple[PhaseMeasured, ...]:
        """Each predicted phase beside its measured device peak (on a CPU device whose tracker
        counts every weight, the host copies taken out, as the lifecycle's validation does)."""
        shared = str(self.session.device).startswith("cpu") and not self.session.counts_placement
        total = sum(self.predictor.weights.values())
        measured: dict[str, int] = {}
        for phase in record.phases:
            label = phase_label(phase.kind, phase.name, phase.stage)
            measured[label] = max(measured.get(label, 0), phase.peak_allocated)
        out = []
        for p in prediction.phases:
            seen = measured.get(p.label)
            if seen is not None and shared:
                seen -= total - p.weights_bytes
            out.append(PhaseMeasured(p.label, p.bound_bytes, seen))
        return tuple(out)
