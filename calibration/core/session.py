"""One diffusers pipeline on one device, wired to a recorder through its formulas.

``Session.run`` records one request and never raises for a failed request (the record keeps the
error). Requests are comparable: each starts from a fresh scheduler (``reset_scheduler``), leaves
none of its scheduler's history to the next request's baseline, and has a generator seeded alike.
Imports torch lazily; diffusers never (any object with the pipeline's ``components`` and
``__call__`` works).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from artifact.point import Point
from calibration.core.calls import DEFAULT_CALL, accepted, reset_scheduler
from calibration.core.host import clock_for, resolve_device
from calibration.core.offload import (
    Offload,
    Placing,
    allocator_reserve,
    chosen,
    placed,
    placement_in_force,
    release,
    unfit_message,
    weights_over_capacity,
)
from calibration.core.weights import module_layers, module_weights
from calibration.core.wiring import PipelineFacts, call_arguments, check_call, pipeline_facts
from calibration.errors import CalibrationError
from calibration.placement.groups import count_groups, offload_every_group
from calibration.placement.pipeline import module_groups
from calibration.plan.model import PlacementKind
from calibration.plan.saved import SavedPlan
from runtime import Pipeline
from runtime.record import WarmupRecord

if TYPE_CHECKING:
    from calibration.core.config import RunConfig
    from calibration.plan.apply import Applied
    from runtime.measure import MemoryBackend, Request, WarmupRecorder
    from runtime.measure.diffusers_hooks import DiffusersPipeline

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _weights_fit(offload: Placing, capacity: int | None) -> Iterator[None]:
    """Weights that do not fit the calibration's cap as placed: the user's choice to change."""
    import torch

    try:
        yield
    except torch.OutOfMemoryError as exc:
        raise CalibrationError(
            f"the weights placed on the device under --calibrate-offload {offload} do not fit "
            f"--device-capacity {capacity} bytes ({str(exc).splitlines()[0]}); use "
            "--calibrate-offload model or group, or a larger --device-capacity"
        ) from None


CallKwargs = Callable[[int], Mapping[str, object]]


class Placed(Protocol):
    """One component's placement in a plan (``calibration.plan.model.Placement``)."""

    @property
    def component(self) -> str: ...

    @property
    def kind(self) -> PlacementKind: ...


class PlacedPlan(Protocol):
    """What ``Session.hand_over`` reads of a plan: each component's placement."""

    @property
    def placements(self) -> Sequence[Placed]: ...


class Session:
    """One pipeline, with a recorder wired to it from its formulas' facts."""

    def __init__(
        self,
        pipe: DiffusersPipeline,
        formulas: Pipeline,
        device: str = "cpu",
        *,
        seed: int = 0,
        clock: str | Callable[[], float] = "auto",
        call_kwargs: CallKwargs | None = None,
        fresh_scheduler: bool = True,
        backend: MemoryBackend | None = None,
        offload: Placing | None = None,
        capacity: int | None = None,
    ) -> None:
        from runtime.measure.diffusers_hooks import pipeline_modules

        self.pipe, self.formulas, self.seed = pipe, formulas, seed
        self.device = resolve_device(device)
        self.call_kwargs = call_kwargs
        if call_kwargs is not None:  # its failure is the caller's (a typed error), not a request's
            call_kwargs(seed)
        self.fresh_scheduler = fresh_scheduler
        self.call_warnings = check_call(formulas, pipe)
        modules = pipeline_modules(pipe)
        self.facts: PipelineFacts = pipeline_facts(formulas, modules)
        self.weights = module_weights(modules)
        self.layer_bytes = module_layers(modules, self.facts.layerwise)
        self.group_bytes = module_groups(modules)  # before any placement hooks the modules
        if offload is None:  # none named: the one in force (``calibrating_under``)
            offload, capacity = placement_in_force()
        reserve = allocator_reserve(self.device, capacity)
        placing = chosen(offload, self.weights, capacity, reserve)
        # a saved plan: ``Offload.PLAN``, the plan kept beside it (the records name both)
        self.saved_plan = placing if isinstance(placing, SavedPlan) else None
        self.offload = Offload.PLAN if isinstance(placing, SavedPlan) else placing
        self.capacity = capacity
        self.handed_over = False  # a plan took over (``hand_over``): its failures are its own
        backend, applied = placed(pipe, placing, self.device, capacity, backend)
        self.applied: Applied | None = applied  # a saved plan's hooks, undone by ``release``
        try:
            with _weights_fit(placing, capacity):
                self.recorder = self._recorder(backend, clock)
        except BaseException:
            self._undo_quietly()  # the pipeline as it was: no plan left half in force
            raise

    @classmethod
    def open(
        cls,
        pipe: DiffusersPipeline,
        formulas: Pipeline,
        config: RunConfig,
        *,
        call_kwargs: CallKwargs | None = None,
        clock: Callable[[], float] | None = None,
    ) -> Session:
        """The session a command runs: ``config``'s device, seed, clock (unless ``clock`` counts
        otherwise), placement and cap -- every command builds its session here."""
        return cls(
            pipe,
            formulas,
            config.device,
            seed=config.seed,
            clock=config.clock if clock is None else clock,
            call_kwargs=call_kwargs,
            offload=config.placing(),
            capacity=config.capacity,
        )

    def _recorder(self, backend: MemoryBackend, clock: str | Callable[[], float]) -> WarmupRecorder:
        """The recorder wired from the formulas' facts (it counts the weights placed now)."""
        from runtime.measure import AutoStages
        from runtime.measure.diffusers_hooks import diffusers_recorder

        return diffusers_recorder(
            self.formulas,
            self.pipe,
            self.device,
            stages=AutoStages(self.facts.stage_for, self.facts.stepped),
            layerwise=self.facts.layerwise,
            entry_points=self.facts.entry_points,
            clock=clock if callable(clock) else clock_for(self.device, clock),
            backend=backend,
        )

    @property
    def counts_placement(self) -> bool:
        """Whether the records count only what the placement holds on the device (the CPU
        tracker's residency, on a capped device); else, on the CPU, the host copies are in every
        peak too (everything counts as on the device, as before any cap)."""
        return self.capacity is not None and self.recorder.reads.residency is not None

    def release(self) -> None:
        """The calibration's placement off the pipeline: diffusers' offloading hooks removed, a
        saved plan undone (every module back where it was; ``UndoError`` when one cannot be)."""
        from runtime.measure.diffusers_hooks import pipeline_modules

        if self.applied is not None:
            self.applied.undo()
            self.applied = None
        else:
            release(self.pipe, self.offload, pipeline_modules(self.pipe))
        self.offload = Offload.NONE

    def _undo_quietly(self) -> None:
        """A saved plan undone while an error propagates (that error is the one to report)."""
        with contextlib.suppress(CalibrationError):
            if self.applied is not None:
                self.applied.undo()
        self.applied = None

    @contextlib.contextmanager
    def placement(self) -> Iterator[Session]:
        """The session, its placement released when the block ends (quietly when it raised)."""
        try:
            yield self
        except BaseException:
            self._undo_quietly()
            raise
        self.release()

    def hand_over(self, plan: PlacedPlan) -> None:
        """Before ``plan`` is applied: the calibration's offloading off the pipeline, and on a
        capped CPU device the residency counts what the plan keeps there (its resident
        components; the others whole while loaded, as the plan's hooks onload them, until
        ``streamed`` counts the streamed blocks of a layerwise one apart)."""
        self.release()
        self.handed_over = True
        residency = self.recorder.reads.residency
        if residency is not None:  # uncapped: every weight counts, as before any placement
            moved = (p.component for p in plan.placements if p.kind is not PlacementKind.RESIDENT)
            residency.follow(frozenset(moved) if self.counts_placement else frozenset())

    def streamed(self) -> None:
        """After a plan is applied: on a capped CPU device, the blocks it streams count one at a
        time, as their group-offloading hooks move them (the rest of their component resident)."""
        from runtime.measure.backends import LiveTensorBackend
        from runtime.measure.diffusers_hooks import pipeline_modules

        backend, residency = self.recorder.backend, self.recorder.reads.residency
        if residency is None or not self.counts_placement:
            return
        if isinstance(backend, LiveTensorBackend):
            residency.stream(count_groups(pipeline_modules(self.pipe), backend))

    def kwargs_for(self, params: Point) -> dict[str, Any]:  # Any: the pipeline's own keywords
        """``pipe(...)``'s keyword arguments at ``params``: defaults, constants, the formulas."""
        import torch

        if self.call_kwargs is not None:
            base = dict(self.call_kwargs(self.seed))
        else:
            base = accepted(self.pipe, DEFAULT_CALL)
        base.setdefault("generator", torch.Generator().manual_seed(self.seed))
        return {**base, **call_arguments(self.formulas, params)}

    def body(self, req: Request) -> object:
        """Run the pipeline for one recorded request (``run`` and the serving warmup call it).

        The scheduler is replaced before the call and again after it, inside the request: a
        multistep scheduler's history (its last model outputs, sized by this request's latents) is
        freed before the request ends, so the next request's baseline does not hold it (a baseline
        that did would shift every stage's peak above it by the previous request's latent size).
        """
        from runtime.measure.diffusers_hooks import run_pipeline

        if self.fresh_scheduler:
            reset_scheduler(self.pipe)
        try:
            return run_pipeline(self.pipe, req, **self.kwargs_for(req.params))
        finally:
            if self.fresh_scheduler:
                reset_scheduler(self.pipe)

    def run(self, params: Point, *, served: bool = False) -> WarmupRecord:
        """One recorded request; a failure is recorded (``record.error``), not raised.

        ``served``: a request served after warmup ended (``WarmupRecorder.served_request``).
        Arguments the formulas cannot give (a `call` value no float holds) raise
        ``CalibrationError`` first: that is the formula file's fault, not the request's."""
        call_arguments(self.formulas, params)
        recorder = self.recorder
        request = (recorder.served_request if served else recorder.request)(**params)
        try:
            with request as req:
                self.body(req)
        except Exception as exc:  # noqa: BLE001 - the record keeps the error; estimators decide
            log.debug("request %s failed: %s", params, exc)
            self._settle(exc)
        return recorder.served[-1] if served else recorder.records[-1]

    def _settle(self, exc: Exception) -> None:
        """After a failed request: the groups its forward left on the device sent home, the
        pipeline's current timestep let go; weights that cannot fit whatever the request stop
        the calibration (``CalibrationError``)."""
        from runtime.measure.diffusers_hooks import pipeline_modules

        offload_every_group(pipeline_modules(self.pipe))  # none, but under group or a plan
        if getattr(self.pipe, "_current_timestep", None) is not None:
            # diffusers clears it only when its loop ends: the failed step's timestep (a view of
            # the request's timesteps) would stay alive above the next request's baseline
            setattr(self.pipe, "_current_timestep", None)  # noqa: B010 - not in the Protocol
        too_big = weights_over_capacity(exc)
        if too_big is not None and not self.handed_over:  # a plan's failure is the lifecycle's
            raise CalibrationError(unfit_message(too_big, self.offload)) from None
