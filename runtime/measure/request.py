"""One warmup request being recorded: stage, iteration and phase markers over nested peak windows.

``Request`` is what ``WarmupRecorder.request`` hands out. Markers open and close windows over the
recorder's memory backend (``PeakWindows``), windows of the same (kind, name, stage) are merged into
one ``Phase``, and on exit the request becomes a ``WarmupRecord``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from attrs import define, evolve, field, frozen

from artifact.point import Point
from runtime.kinds import PhaseKind
from runtime.measure.backends import MemoryBackend
from runtime.measure.layers import HookSet, LayerUseTracker, hook_components
from runtime.measure.residency import WeightReads, reads_mode
from runtime.measure.windows import PeakWindows, Window
from runtime.record import ErrorInfo, Iteration, Phase, StageIterations, WarmupRecord

if TYPE_CHECKING:
    from types import TracebackType

    from torch import nn
    from typing_extensions import Self


class FormulaPipeline(Protocol):
    """What the measuring layer uses of ``runtime.formulas.Pipeline`` (typed here, not imported)."""

    name: str

    @property
    def stages(self) -> tuple[str, ...]: ...

    @property
    def default_workload(self) -> Point: ...

    def stage_iterations(
        self, probe: Point, target: Point | None = None
    ) -> dict[str, tuple[int, int]]: ...

    def is_admissible(self, /, **params: int | bool) -> bool: ...

    def violations(self, /, **params: int | bool) -> Iterable[object]: ...

    def largest_admissible(
        self, name: str, at_most: int, /, **others: int | bool
    ) -> int | None: ...


def _stage_set(value: Iterable[str]) -> frozenset[str]:
    """Iterative stage names as a frozen set (any iterable accepted)."""
    return frozenset(value)


@frozen
class AutoStages:
    """Stages opened from component use, for pipelines (diffusers) that do not mark their stages.

    ``stage_for`` keys are a component (``"transformer"``: any of its entry points) or a component
    and method (``"vae.encode"``), which wins over the component alone.
    """

    stage_for: Mapping[str, str]
    iterative: frozenset[str] = field(converter=_stage_set, default=frozenset())

    def stage_of(self, component: str, method: str = "forward") -> str | None:
        """The stage that ``component.method`` opens, if any."""
        return self.stage_for.get(f"{component}.{method}", self.stage_for.get(component))


@define(eq=False)
class _Open:
    """A phase window being measured."""

    key: tuple[str, str, str | None]
    window: Window
    started: float
    allocated_before: int
    active: tuple[str, ...]
    used: dict[str, None] = field(factory=dict)


@define
class _Merged:
    """Windows of one (kind, name, stage) merged into one phase (their peaks: ``window``)."""

    count: int
    allocated_before: int
    window: Window
    duration_s: float
    active: dict[str, None]
    used: dict[str, None]


@define
class _Clock:
    """Synchronise the device (when asked) before reading the clock: durations cover device work."""

    backend: MemoryBackend
    read: Callable[[], float]
    synchronize: bool

    def __call__(self) -> float:
        if self.synchronize:
            self.backend.synchronize()
        return self.read()


class RequestOwner(Protocol):
    """What a request reads of the recorder that made it and the three calls it makes on it
    (``WarmupRecorder`` is one): typed here, so the request never imports the recorder."""

    pipeline: FormulaPipeline
    backend: MemoryBackend
    clock: Callable[[], float]
    synchronize: bool
    components: Mapping[str, nn.Module]
    layerwise: tuple[str, ...]
    layer_groups: Mapping[str, Iterable[str]] | None
    entry_points: Mapping[str, str | Sequence[str]]
    auto_stages: AutoStages | None
    reads: WeightReads  # which component each op reads, and a placement's residency

    def open_request(self, request: Request) -> None:
        """``request`` is being recorded now; raises ``RuntimeError`` while another one is."""

    def close_request(self, request: Request) -> None:
        """``request`` is no longer being recorded (its record may not exist: it failed)."""

    def keep_record(self, record: WarmupRecord) -> None:
        """A finished request's record."""


class Request:
    """One warmup request being recorded; the context manager ``WarmupRecorder.request`` returns."""

    def __init__(self, recorder: RequestOwner, params: Point) -> None:
        self.params = dict(params)
        self._recorder = recorder
        self._windows = PeakWindows(recorder.backend)
        self._clock = _Clock(recorder.backend, recorder.clock, recorder.synchronize)
        self._stage: _Open | None = None
        self._stage_auto = False
        self._iteration: tuple[Window, float, int] | None = None
        self._setup: _Open | None = None
        self._phases: list[_Open] = []
        self._merged: dict[tuple[str, str, str | None], _Merged] = {}
        self._iterations: list[Iteration] = []
        self._counted: dict[str, int] = {}
        self._explicit: dict[str, tuple[int, int]] = {}
        self._component_depth: dict[str, int] = {}
        self._layers = LayerUseTracker(lambda: self.current_stage)
        self._hooks = HookSet()
        self._record: WarmupRecord | None = None

    # --- the user-facing markers ----------------------------------------------------------------

    @property
    def current_stage(self) -> str | None:
        """The stage being run, if any."""
        return self._stage.key[1] if self._stage else None

    @contextmanager
    def stage(self, name: str, components: Iterable[str] = ()) -> Iterator[None]:
        """Mark a pipeline stage; ``components`` are those resident and active for it."""
        self.begin_stage(name, components)
        try:
            yield
        finally:
            if self.current_stage == name:
                self.end_stage()

    @contextmanager
    def iteration(self) -> Iterator[None]:
        """Mark one run of the current stage's repeated unit (a denoising step)."""
        self.begin_iteration()
        try:
            yield
        finally:
            self.end_iteration()

    @contextmanager
    def phase(
        self, kind: str, components: Iterable[str] = (), *, name: str | None = None
    ) -> Iterator[None]:
        """Mark a phase such as ``"prefetch"`` or ``"transition"`` (to full weights)."""
        opened = self._open_phase(kind, name or kind, tuple(components))
        try:
            yield
        finally:
            self._close_phase(opened)

    def record_iterations(self, stage: str, measured: int, target: int) -> None:
        """State a stage's (measured, target) pair; it wins over counting and over the formulas."""
        self._explicit[stage] = (int(measured), int(target))

    def component_read(self, name: str) -> None:
        """An op read ``name``'s weights (``WeightReads``): it is active in every open window,
        whatever method ran it; with no stage open, its automatic stage opens."""
        auto = self._recorder.auto_stages
        stage = auto.stage_of(name) if auto is not None else None
        if self._stage is None and auto is not None and stage is not None:
            self._auto_stage(stage, name, auto.iterative)
        for opened in self._open_windows():
            opened.used[name] = None
            if name not in opened.active:
                opened.active = (*opened.active, name)

    def mark_used(self, *components: str) -> None:
        """Note components used in the open phases when no forward hook can see them."""
        for opened in self._open_windows():
            opened.used.update(dict.fromkeys(components))

    # --- imperative forms (for hooks that cannot hold a ``with`` block) -------------------------

    def begin_stage(self, name: str, components: Iterable[str] = (), *, auto: bool = False) -> None:
        """Open a stage; stages do not nest."""
        if self._stage is not None:
            raise RuntimeError(
                f"stage {name!r} opened inside stage {self.current_stage!r}; stages do not nest"
            )
        self._stage = self._open_window(("stage", name, name), tuple(components))
        self._stage_auto = auto
        self._open_setup()

    def end_auto_stage(self) -> None:
        """Close the open stage if it was opened from component use (an explicit one stays).

        Auto stages stay open until the next component runs; work between components that belongs
        to no stage (a diffusers pipeline's ``prepare_latents`` after its text encoders) calls this
        so that it is not counted in the previous stage.
        """
        if self._stage is not None and self._stage_auto:
            self.end_stage()

    def end_stage(self) -> None:
        """Close the open stage (and an iteration left open in it)."""
        if self._stage is None:
            raise RuntimeError("no stage is open")
        self.end_iteration(strict=False)
        self._close_setup()
        stage, self._stage = self._stage, None
        self._close_window(stage)
        if not self._counted.get(stage.key[1]):
            self._merged.pop(
                ("setup", *stage.key[1:]), None
            )  # without iterations, setup is the stage

    def begin_iteration(self) -> None:
        """Open one iteration of the current stage."""
        stage = self.current_stage
        if stage is None:
            raise RuntimeError("an iteration must be inside a stage")
        if self._iteration is not None:
            raise RuntimeError("iterations do not nest")
        index = self._counted.get(stage, 0)
        self._close_setup()
        self._iteration = (self._windows.open(), self._clock(), index)

    def end_iteration(self, *, strict: bool = True) -> None:
        """Close the open iteration and count it for its stage."""
        if self._iteration is None:
            if strict:
                raise RuntimeError("no iteration is open")
            return
        window, started, index = self._iteration
        self._iteration = None
        self._windows.close(window)
        stage = self.current_stage or ""
        self._iterations.append(
            Iteration(
                stage, index, window.peak_allocated, window.peak_reserved, self._clock() - started
            )
        )
        self._counted[stage] = index + 1
        self._open_setup()

    def _open_setup(self) -> None:
        """A stage's work outside its iterations (loading, latents...) is its setup phase."""
        if self._stage is not None and self._setup is None:
            self._setup = self._open_phase("setup", self._stage.key[1], self._stage.active)

    def _close_setup(self) -> None:
        if self._setup is not None:
            setup, self._setup = self._setup, None
            self._close_phase(setup)

    def step_end(self) -> None:
        """End of a step (diffusers ``callback_on_step_end``): close the open iteration, if any."""
        self.end_iteration(strict=False)

    # --- component hooks ------------------------------------------------------------------------

    def component_entered(self, name: str, method: str = "forward") -> None:
        """A component started running: switch stage when automatic, open its component phase."""
        depth = self._component_depth.get(name, 0)
        self._component_depth[name] = depth + 1
        if depth:
            return
        auto = self._recorder.auto_stages
        stage = auto.stage_of(name, method) if auto is not None else None
        if auto is not None and stage is not None:
            self._auto_stage(stage, name, auto.iterative)
        residency = self._recorder.reads.residency
        if residency is not None:  # the placement onloads it as it starts (accelerate's hook),
            residency.entered(name)  # in the stage its start opens, never the one before
        for opened in self._open_windows():
            opened.used[name] = None
        active = (*(self._stage.active if self._stage else ()), name)
        opened = self._open_phase("component", name, tuple(dict.fromkeys(active)))
        opened.used[name] = None

    def component_exited(self, name: str) -> None:
        """A component returned (or raised): close its component phase."""
        depth = self._component_depth.get(name, 0) - 1
        self._component_depth[name] = max(depth, 0)
        residency = self._recorder.reads.residency
        if depth == 0 and residency is not None:  # what its reads onloaded goes home with it
            residency.exited(name)
        if depth == 0:
            for opened in reversed(self._phases):
                if opened.key[:2] == (PhaseKind.COMPONENT, name):
                    self._close_phase(opened)
                    break

    def _auto_stage(self, stage: str, component: str, iterative: frozenset[str]) -> None:
        if self.current_stage != stage:
            if self._stage is not None and not self._stage_auto:
                return  # an explicit stage is open: the user's marking wins
            if self._stage is not None:
                self.end_stage()
            self.begin_stage(stage, (component,), auto=True)
        elif self._stage is not None and component not in self._stage.active:
            self._stage.active = (*self._stage.active, component)
        if stage in iterative and self._iteration is None:
            self.begin_iteration()

    # --- windows --------------------------------------------------------------------------------

    def _open_windows(self) -> list[_Open]:
        return [*([self._stage] if self._stage else []), *self._phases]

    def _open_window(self, key: tuple[str, str, str | None], active: tuple[str, ...]) -> _Open:
        allocated = self._recorder.backend.current_allocated()
        self._recorder.reads.new_segment()
        return _Open(key, self._windows.open(), self._clock(), allocated, active)

    def _open_phase(self, kind: str, name: str, active: tuple[str, ...]) -> _Open:
        opened = self._open_window((kind, name, self.current_stage), active)
        self._phases.append(opened)
        return opened

    def _close_phase(self, opened: _Open) -> None:
        if opened in self._phases:
            self._phases.remove(opened)
            self._close_window(opened)

    def _close_window(self, opened: _Open) -> None:
        self._windows.close(opened.window)
        duration = self._clock() - opened.started
        merged = self._merged.get(opened.key)
        if merged is None:
            self._merged[opened.key] = _Merged(
                1,
                opened.allocated_before,
                evolve(opened.window),
                duration,
                dict.fromkeys(opened.active),
                dict(opened.used),
            )
            return
        merged.count += 1
        merged.window.merge(opened.window)
        merged.duration_s += duration
        merged.active.update(dict.fromkeys(opened.active))
        merged.used.update(opened.used)

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        recorder = self._recorder
        recorder.open_request(self)  # requests do not nest
        try:
            if recorder.components:
                hook_components(self._hooks, recorder.components, self, recorder.entry_points)
                layerwise = {c: recorder.components[c] for c in recorder.layerwise}
                self._layers.attach(self._hooks, layerwise, recorder.layer_groups)
        except BaseException:
            self._hooks.remove()  # a bad layer group: leave the model as it was
            recorder.close_request(self)
            raise
        recorder.reads.listener = self
        self._tracking = contextlib.ExitStack()
        self._tracking.enter_context(recorder.backend.tracking())
        if not recorder.reads.fused:
            self._tracking.enter_context(reads_mode(recorder.reads))
        self._clock.backend.synchronize()
        self._baseline = recorder.backend.current_allocated()
        self._overall = self._windows.open()
        self._started = self._clock()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        recorder = self._recorder
        try:
            self.end_iteration(strict=False)
            if self._stage is not None:
                self.end_stage()
            for opened in reversed(self._phases[:]):
                self._close_phase(opened)
            self._windows.close(self._overall)
            duration = self._clock() - self._started
        finally:
            self._tracking.close()
            self._hooks.remove()
            recorder.close_request(self)
            recorder.reads.listener = None
            if recorder.reads.residency is not None:  # diffusers' maybe_free_model_hooks
                recorder.reads.residency.offload_all()
        self._record = self._build(
            ErrorInfo.from_exception(exc) if exc is not None else None, duration
        )
        recorder.keep_record(self._record)

    @property
    def record(self) -> WarmupRecord:
        """The finished record (after the ``with`` block)."""
        if self._record is None:
            raise RuntimeError("the request is still running")
        return self._record

    def _build(self, error: ErrorInfo | None, duration: float) -> WarmupRecord:
        recorder = self._recorder
        phases = tuple(
            Phase(
                kind,
                name,
                stage,
                m.count,
                m.allocated_before,
                m.window.peak_allocated,
                m.window.peak_reserved,
                m.duration_s,
                tuple(m.active),
                tuple(m.used),
                m.window.peak_weights,
                m.window.peak_activations,
                m.window.peak_levels,
            )
            for (kind, name, stage), m in self._merged.items()
        )
        return WarmupRecord(
            pipeline=recorder.pipeline.name,
            device=str(recorder.backend.device),
            backend=recorder.backend.name,
            params=self.params,
            error=error,
            baseline_allocated=self._baseline,
            peak_allocated=self._overall.peak_allocated,
            peak_reserved=self._overall.peak_reserved,
            duration_s=duration,
            phases=phases,
            iterations=tuple(self._iterations),
            stage_iterations=self._stage_pairs(),
            layer_uses=self._layers.uses(recorder.pipeline.stages),
        )

    def _stage_pairs(self) -> tuple[StageIterations, ...]:
        pipeline = self._recorder.pipeline
        formula = pipeline.stage_iterations(probe=self.params)
        pairs: list[StageIterations] = []
        for stage in pipeline.stages:
            at_probe, target = formula[stage]
            if stage in self._explicit:
                pairs.append(StageIterations(stage, *self._explicit[stage], "explicit"))
            elif self._counted.get(stage):
                pairs.append(StageIterations(stage, self._counted[stage], target, "counted"))
            else:
                pairs.append(StageIterations(stage, at_probe, target, "formula"))
        pairs += [
            StageIterations(s, m, t, "explicit")
            for s, (m, t) in self._explicit.items()
            if s not in formula
        ]
        return tuple(pairs)
