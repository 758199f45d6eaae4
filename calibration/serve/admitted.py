"""The worker the HTTP face serves with: the lifecycle's session served through
``serve.worker.Worker`` (admission once before any work; RUN, REPLACE then the placement in force
back, or ``RequestRefused``), its ``Served`` turned into the app's ``Answer``.

Each answer sets every phase's predicted bound beside its measured peak; a phase measured above
its bound is a drift event (a warning in the log, ``wf_drift_events_total``): its shape and excess
join a bounded history, and from then on that shape and every larger one (each int param at least
as large, the flags equal) is admitted conservatively, with the excess added to the device's
reserve (a RUN may become a REPLACE that streams more, or a refusal). Every served request's
phases are also points of the calibration's evidence (``learn.Learner``, a bounded history): at
the next idle moment (``idle``: no request waits) after a drift, or after enough new points, the
predictor is fitted again with them, and a drift whose point the new fit covers is no longer
reserved. After a drift the validated target is then planned again (on the device with the
excess of the drifts not yet learned reserved), applied, and validated on one served target
request (admitted RUN, every phase within its bound); a plan that fails the validation is taken
off and the one before it put back. ``close`` undoes the
hooks and writes the served records (and the learned points) to the state folder.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs
from attrs import define, frozen

from artifact.point import Point
from artifact.spelling import point_text
from artifact.units import show_bytes
from calibration.plan.model import Device, Plan, PlanInputError
from calibration.serve.admission import DecisionKind
from calibration.serve.answer import Answer, PhasePeak
from calibration.serve.learn import Evidence, Learner
from calibration.serve.state import StaleState, StateFolder
from calibration.serve.warm import Started
from calibration.serve.worker import Served, Worker
from runtime import FormulaError, Pipeline

if TYPE_CHECKING:
    from calibration.core.session import Session
    from runtime.measure.request import Request

log = logging.getLogger(__name__)
#: Drift events remembered (the newest): the shapes served conservatively.
DRIFTS_KEPT = 32


@frozen
class Drift:
    """A served shape measured above its bound, and by how much (the worst phase)."""

    params: Point
    excess_bytes: int
    learned: bool = False  # its served point entered the history: a re-fit covers it

    def covers(self, params: Point) -> bool:
        """Whether ``params`` is this shape or larger: each int param at least as large, each
        flag the same."""
        for name, value in self.params.items():
            asked = params.get(name)
            if type(value) is bool or type(asked) is bool:
                if asked != value:
                    return False
            elif not isinstance(asked, int) or asked < value:
                return False
        return True


@define
class _Output:
    """The pipeline's output of the request being served (the recorder keeps only figures)."""

    value: object = None


class AdmittedWorker:
    """Serves the lifecycle's session (``Started``) through ``Worker`` until ``close``."""

    def __init__(
        self,
        session: Session,
        started: Started,
        defaults: Point,
        state: StateFolder | None,
        device: Device,
        on_close: Callable[[], object] = lambda: None,
    ) -> None:
        self.inner = Worker.after(started.outcome, session, device)  # NotServing: said why
        self.session, self.started, self.state = session, started, state
        self.learner = _learner(started, session.formulas, state)
        self._defaults = dict(defaults)
        self.drifts: deque[Drift] = deque(maxlen=DRIFTS_KEPT)
        self.replan = False  # a drift asks for a re-plan at the next idle moment
        self.closed, self.on_close = False, on_close

    @property
    def pipeline(self) -> Pipeline:
        return self.session.formulas

    @property
    def defaults(self) -> Point:
        return self._defaults

    def serve(self, params: Point) -> Answer:
        """One request through admission; ``RequestRefused`` and ``RequestFailed`` propagate."""
        with self._kept_output() as output, self._cautious(params):
            served = self.inner.serve(params)
        drift = not all(p.within for p in served.phases)
        learned = self.learner is not None and self.learner.served(served.record, drift=drift)
        if drift:
            _log_drift(served)
            excess = max((p.measured_bytes or 0) - p.predicted_bytes for p in served.phases)
            self.drifts.append(Drift(MappingProxyType(dict(params)), excess, learned))
            self.replan = True
        rows = tuple(PhasePeak(p.label, p.predicted_bytes, p.measured_bytes) for p in served.phases)
        kind = served.decision.kind
        replaced = kind is DecisionKind.REPLACE
        return Answer(kind.value, rows, served.seconds, output.value, drift, replaced)

    def idle(self) -> bool:
        """With no request waiting: re-fit with the served points when due; after a drift,
        re-plan, apply and validate the target (see the module docstring); whether it did."""
        learned = self._learn()
        if not self.replan:
            return False
        self.replan = False
        inner, target = self.inner, self._defaults
        excess = max((d.excess_bytes for d in self.drifts if d.covers(target)), default=0)
        if not excess and not learned:
            return False
        device = attrs.evolve(inner.device, reserve_bytes=inner.device.reserve + excess)
        try:
            plan = inner.planner.plan_for(inner.predictor, target, device)
        except (PlanInputError, FormulaError) as exc:
            log.warning("re-plan after drift: no plan (%s); serving on as before", exc)
            return False
        if not plan.feasible or plan == inner.plan:
            log.warning("re-plan after drift: nothing better (%s)", plan.reason or "the same plan")
            return False
        return self._tried(plan)

    def _learn(self) -> bool:
        """The predictor re-fitted with the served points, when due, in force: the plans made
        by the one before forgotten, and the drifts whose points it covers no longer reserved."""
        predictor = self.learner.refit() if self.learner is not None else None
        if predictor is None:
            return False
        self.inner.predictor = predictor
        self.inner.planner.plans.clear()
        kept = [d for d in self.drifts if not d.learned]
        self.drifts.clear()
        self.drifts.extend(kept)
        return True

    def _tried(self, plan: Plan) -> bool:
        """``plan`` in force if one served target request validates it; else the one before."""
        inner, before = self.inner, self.inner.plan
        try:
            self._place(plan)
            with self._kept_output(), self._cautious(self._defaults):
                served = inner.serve(self._defaults)
            over = [p.label for p in served.phases if not p.within]
            why = f"admitted {served.decision.kind.value}" + (f", over: {over}" if over else "")
            valid = served.decision.kind is DecisionKind.RUN and not over
        except Exception as exc:  # noqa: BLE001 - applied or ran and failed: the one before back
            why, valid = f"{type(exc).__name__}: {exc}", False
        if not valid:
            log.warning(
                "re-plan after drift: not validated (%s); the placement before is back", why
            )
            self._place(before)
            return False
        log.info("re-plan after drift: the target validated under the new placement")
        return True

    def _place(self, plan: Plan | None) -> None:
        """``plan`` as the placement in force (the one before taken off)."""
        from calibration.plan.apply import apply

        inner, session = self.inner, self.session
        if inner.applied is not None:
            inner.applied.undo()
            inner.applied = None
        inner.plan = plan
        if plan is not None:
            session.hand_over(plan)
            inner.applied = apply(plan, session.pipe, device=session.device, offload_device="cpu")
            session.streamed()

    @contextlib.contextmanager
    def _cautious(self, params: Point) -> Iterator[None]:
        """Admission inside the block with the largest excess of a drift that covers ``params``
        added to the reserve (the device as configured afterwards)."""
        excess = max((d.excess_bytes for d in self.drifts if d.covers(params)), default=0)
        device = self.inner.device
        if excess:
            log.info(
                "serving %s conservatively: %s more reserved",
                point_text(params),
                show_bytes(excess),
            )
            self.inner.device = attrs.evolve(device, reserve_bytes=device.reserve + excess)
        try:
            yield
        finally:
            self.inner.device = device

    @contextlib.contextmanager
    def _kept_output(self) -> Iterator[_Output]:
        """``session.body`` keeps its output for the answer inside the block (an instance
        attribute over the method, taken off after)."""
        session, output = self.session, _Output()
        body = session.body

        def keeping(req: Request) -> object:
            output.value = body(req)
            return output.value

        vars(session)["body"] = keeping
        try:
            yield output
        finally:
            vars(session).pop("body", None)

    def close(self) -> None:
        """Undo the hooks in force (once) and write the served records to the state folder."""
        if self.closed:
            return
        self.closed = True
        if self.inner.applied is not None:
            self.inner.applied.undo()
            self.inner.applied = None
        log.info("closed: every hook removed, every module back on its device")
        if self.state is not None:
            served = self.session.recorder.served
            self.state.flush_served(served)
            if self.learner is not None and self.learner.refits:
                self.state.write_learned(self.learner.history.points())
            log.info("closed: %d served records written to %s", len(served), self.state.root)
        self.on_close()


def _learner(started: Started, pipeline: Pipeline, state: StateFolder | None) -> Learner | None:
    """The worker's learner from its calibration; a warm start's stored points loaded (an
    unreadable file is logged and left: the worker learns again)."""
    cal = started.outcome.calibration
    if cal is None:
        return None
    learner = Learner(Evidence.of(cal, pipeline), pipeline, state)
    if state is not None and started.warm:
        try:
            loaded = learner.load(state.read_learned())
        except StaleState as exc:
            log.warning("the stored served points were not read: %s", exc)
        else:
            log.info("%d stored served points: re-fitted at the first idle moment", loaded)
    return learner


def _log_drift(served: Served) -> None:
    for p in served.phases:
        if not p.within:
            log.warning(
                "drift: %s phase %s measured %s, above its bound %s",
                point_text(served.prediction.params),
                p.label,
                show_bytes(p.measured_bytes),
                show_bytes(p.predicted_bytes),
            )
