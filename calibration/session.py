"""One example pipeline on one device, wired to a recorder: the measuring half of `dslc calibrate`.

``Session.run`` records one request and never raises for a failed request (the record keeps the
error). The harness makes requests comparable: each starts from a fresh scheduler (see below).
Imports torch and diffusers lazily.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from calibration.examples import Example, Params
from runtime.record import WarmupRecord

log = logging.getLogger(__name__)


class CalibrateError(Exception):
    """A problem with the request (bad formulas, an inadmissible shape, no device): exit 1."""


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise CalibrateError("--device cuda: no CUDA device is available (try --device cpu)")
    return device


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """diffusers and transformers warn about optional backends; those lines are not ours to
    print.
    """
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
    """One CPU thread by default: a shared 2-core machine makes multi-threaded CPU timing
    erratic.
    """
    import torch

    if device != "cpu" or threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def clock_for(device: str, clock: str = "auto") -> Callable[[], float]:
    """The recorder's clock: "cpu" is this thread's CPU time, "wall" the wall clock; "auto" picks
    cpu on the CPU (other processes on a shared machine then do not count) and wall on an
    accelerator.
    """
    if clock == "auto":
        clock = "cpu" if device == "cpu" else "wall"
    if clock not in ("cpu", "wall"):
        raise CalibrateError(f"unknown clock {clock!r}; expected auto, cpu or wall")
    return time.thread_time if clock == "cpu" else time.perf_counter


def module_weight_bytes(module: Any) -> int:
    """Bytes of a module's parameters and buffers, each storage once."""
    storages = {}
    for t in (*module.parameters(), *module.buffers()):
        storage = t.untyped_storage()
        storages[id(storage)] = storage.nbytes()
    return sum(storages.values())


class Session:
    """One example pipeline, built once, with a recorder wired to it."""

    def __init__(
        self, example: Example, pipeline: Any, device: str, seed: int = 0, clock: str = "auto"
    ) -> None:
        from runtime.measure import AutoStages
        from runtime.measure.diffusers_hooks import diffusers_recorder, pipeline_modules

        self.example, self.formulas, self.device, self.seed = example, pipeline, device, seed
        self.pipe = example.build(seed)
        if device != "cpu":
            self.pipe.to(device)
        modules = pipeline_modules(self.pipe)
        self.weights = {name: module_weight_bytes(m) for name, m in modules.items()}
        self.recorder = diffusers_recorder(
            pipeline,
            self.pipe,
            device,
            stages=AutoStages(example.stage_for, example.iterative),
            layerwise=example.layerwise,
            entry_points=example.entry_points,
            clock=clock_for(device, clock),
        )

    def run(self, params: Params) -> WarmupRecord:
        """One recorded request; a failure is recorded (``record.error``), not raised."""
        from runtime.measure.diffusers_hooks import run_pipeline

        _fresh_scheduler(self.pipe)
        request = self.recorder.request(**params)
        try:
            with request as req:
                run_pipeline(
                    self.pipe,
                    req,
                    self.example.call_args,
                    **self.example.kwargs_for(req.params, self.seed),
                )
        except Exception as exc:  # noqa: BLE001 - the record keeps the error; estimators decide what it means
            log.debug("request %s failed: %s", params, exc)
        return self.recorder.records[-1]


def _fresh_scheduler(pipe: Any) -> None:
    """Start every request from the same state: a scheduler keeps the last request's timesteps and
    sigmas (sized by its steps) alive until the next request sets new ones, which would move the
    next request's baseline by a few bytes.
    """
    scheduler = getattr(pipe, "scheduler", None)
    if scheduler is not None and hasattr(scheduler, "config"):
        pipe.scheduler = type(scheduler).from_config(scheduler.config)
