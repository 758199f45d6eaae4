"""One diffusers pipeline on one device, wired to a recorder through its formulas.

``Session.run`` records one request and never raises for a failed request (the record keeps the
error). Requests are comparable: each starts from a fresh scheduler (``reset_scheduler``) and a
generator seeded alike. Imports torch lazily; diffusers never (any object with the pipeline's
``components`` and ``__call__`` works).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from calibration.errors import CalibrationError
from calibration.wiring import PipelineFacts, call_arguments, pipeline_facts
from runtime import Pipeline
from runtime.record import WarmupRecord

if TYPE_CHECKING:
    from torch import nn

    from runtime.measure import MemoryBackend, Request, WarmupRecorder
    from runtime.measure.diffusers_hooks import DiffusersPipeline

log = logging.getLogger(__name__)

Params = Mapping[str, int | bool]
CallKwargs = Callable[[int], Mapping[str, object]]

#: What a request passes besides the formulas' `call` arguments, when the pipeline takes it.
DEFAULT_CALL: Mapping[str, object] = {"prompt": "a cat dancing", "output_type": "pt"}


def resolve_device(device: str) -> str:
    """``auto``: CUDA when available, else the CPU; ``cuda`` without a device is an error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise CalibrationError("--device cuda: no CUDA device is available (try --device cpu)")
    return device


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """diffusers and transformers warn about optional backends: not ours to print."""
    import importlib
    import warnings

    verbosity = []
    for name in ("diffusers.utils.logging", "transformers.utils.logging"):
        try:  # each library configures its own root logger (and its level) on first use
            module = importlib.import_module(name)
        except ImportError:
            continue
        verbosity.append((module, module.get_verbosity()))
        module.set_verbosity(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for module, level in verbosity:
            module.set_verbosity(level)


@contextlib.contextmanager
def torch_threads(device: str, threads: int | None) -> Iterator[None]:
    """One CPU thread by default: a shared 2-core machine makes threaded CPU timing erratic. With
    one thread, the calling thread is also pinned to one core (``pinned_to_one_core``)."""
    import torch

    if device != "cpu" or threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with pinned_to_one_core() if threads == 1 else contextlib.nullcontext():
            yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def pinned_to_one_core() -> Iterator[int | None]:
    """Keep the calling thread on one core (the one it runs on now) while timing on the CPU.

    Cores need not run alike: a hybrid CPU's performance and efficiency cores, or a VM's vCPUs when
    one shares its physical core with a busy neighbour. Measured here (bench/README.md, "Time
    near the target"): the tiny FLUX denoising step took 9.0-11.5 ms on one vCPU and 6.8-8.5 ms on
    the other, alternating runs of ``bench/drift.py`` under ``taskset``, and which one is slower
    changes over minutes; a thread the scheduler moves between them makes every timing bimodal.
    Pinning runs the probes and the target on the same core. Yields the core, or None where
    affinity is not available (macOS) or may not be changed.
    """

    get = getattr(os, "sched_getaffinity", None)
    set_ = getattr(os, "sched_setaffinity", None)
    if get is None or set_ is None:
        yield None
        return
    allowed = get(0)
    core = _current_core()
    if core not in allowed:
        core = min(allowed)
    try:
        set_(0, {core})
    except OSError:
        yield None
        return
    try:
        yield core
    finally:
        set_(0, allowed)


def _current_core() -> int | None:
    """The core the calling thread last ran on (Linux: field 39 of /proc/thread-self/stat), so
    that two calibrating processes on one machine tend to keep to different cores."""
    try:
        with open("/proc/thread-self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return int(fields[36])
    except (OSError, IndexError, ValueError):
        return None


def clock_for(device: str, clock: str = "auto") -> Callable[[], float]:
    """The recorder's clock: "cpu" is this thread's CPU time, "wall" the wall clock; "auto" picks
    cpu on the CPU (other processes on a shared machine then do not count), wall elsewhere."""
    if clock == "auto":
        clock = "cpu" if device == "cpu" else "wall"
    if clock not in ("cpu", "wall"):
        raise CalibrationError(f"unknown clock {clock!r}; expected auto, cpu or wall")
    return time.thread_time if clock == "cpu" else time.perf_counter


def weight_bytes(module: nn.Module) -> int:
    """Bytes of a module's parameters and buffers, each storage counted once (tied weights too)."""
    storages = {}
    for t in (*module.parameters(), *module.buffers()):
        storage = t.untyped_storage()
        storages[storage.data_ptr(), storage.device] = storage.nbytes()
    return sum(storages.values())


def pipeline_modules(pipe: DiffusersPipeline) -> dict[str, nn.Module]:
    """The pipeline's ``nn.Module`` components by name (no schedulers, tokenizers or None)."""
    from torch import nn

    return {name: c for name, c in pipe.components.items() if isinstance(c, nn.Module)}


def reset_scheduler(pipe: DiffusersPipeline) -> None:
    """Give ``pipe`` a fresh scheduler of the same class and config.

    Schedulers keep request state: the last timesteps and sigmas, and multistep ones (PNDM, DPM++,
    UniPC) their last model outputs, sized by the latents. Without a reset that history leaks into
    the next request's baseline and peaks, so two requests of one shape measure differently.
    """
    scheduler = pipe.components.get("scheduler")
    config = getattr(scheduler, "config", None)
    from_config = getattr(type(scheduler), "from_config", None)
    if scheduler is None or config is None or from_config is None:
        return
    setattr(pipe, "scheduler", from_config(config))  # noqa: B010 - not every pipeline has one


def accepted(pipe: DiffusersPipeline, kwargs: Mapping[str, object]) -> dict[str, object]:
    """The keyword arguments ``pipe.__call__`` takes (all of them when it takes ``**kwargs``)."""
    try:
        parameters = inspect.signature(pipe.__call__).parameters
    except (TypeError, ValueError):
        return dict(kwargs)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in parameters}


class Session:
    """One pipeline, with a recorder wired to it from its formulas' facts."""

    def __init__(
        self,
        pipe: DiffusersPipeline,
        formulas: Pipeline,
        device: str = "cpu",
        *,
        seed: int = 0,
        clock: str = "auto",
        call_kwargs: CallKwargs | None = None,
        fresh_scheduler: bool = True,
        backend: MemoryBackend | None = None,
    ) -> None:
        from runtime.measure import AutoStages
        from runtime.measure.diffusers_hooks import diffusers_recorder

        self.pipe, self.formulas, self.seed = pipe, formulas, seed
        self.device = resolve_device(device)
        self.call_kwargs = call_kwargs
        self.fresh_scheduler = fresh_scheduler
        if self.device != "cpu":
            to = getattr(pipe, "to", None)
            if callable(to):
                to(self.device)
        modules = pipeline_modules(pipe)
        self.facts: PipelineFacts = pipeline_facts(formulas, modules)
        self.weights = {name: weight_bytes(m) for name, m in modules.items()}
        from calibration.plan.torch_sizes import layer_bytes

        self.layer_bytes = {
            name: per
            for name in self.facts.layerwise
            if name in modules and (per := layer_bytes(modules[name]))
        }
        self.recorder: WarmupRecorder = diffusers_recorder(
            formulas,
            pipe,
            self.device,
            stages=AutoStages(self.facts.stage_for, self.facts.stepped),
            layerwise=self.facts.layerwise,
            entry_points=self.facts.entry_points,
            clock=clock_for(self.device, clock),
            **({"backend": backend} if backend is not None else {}),
        )

    def kwargs_for(self, params: Params) -> dict[str, Any]:
        """``pipe(...)``'s keyword arguments at ``params``: defaults, constants, the formulas."""
        import torch

        if self.call_kwargs is not None:
            base = dict(self.call_kwargs(self.seed))
        else:
            base = accepted(self.pipe, DEFAULT_CALL)
        base.setdefault("generator", torch.Generator().manual_seed(self.seed))
        return {**base, **call_arguments(self.formulas, params)}

    def body(self, req: Request) -> object:
        """Run the pipeline for one recorded request (``run`` and the serving warmup call it)."""
        from runtime.measure.diffusers_hooks import run_pipeline

        if self.fresh_scheduler:
            reset_scheduler(self.pipe)
        return run_pipeline(self.pipe, req, **self.kwargs_for(req.params))

    def run(self, params: Params) -> WarmupRecord:
        """One recorded request; a failure is recorded (``record.error``), not raised."""
        request = self.recorder.request(**params)
        try:
            with request as req:
                self.body(req)
        except Exception as exc:  # noqa: BLE001 - the record keeps the error; estimators decide
            log.debug("request %s failed: %s", params, exc)
        return self.recorder.records[-1]
