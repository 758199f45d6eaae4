"""Host and device setup for timing: the device, quiet libraries, one pinned thread, the clock.

Imports torch lazily (only when called); nothing here knows about pipelines or formulas.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator

from calibration.errors import CalibrationError


def resolve_device(device: str) -> str:
    """``auto``: CUDA when available, else the CPU; ``cuda`` or ``cuda:N`` without that device is
    an error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise CalibrationError(f"--device {device}: no CUDA device is available (try --device cpu)")
    if device.startswith("cuda:"):
        index = int(device.removeprefix("cuda:"))
        if index >= torch.cuda.device_count():
            raise CalibrationError(
                f"--device {device}: there are {torch.cuda.device_count()} CUDA devices "
                "(cuda:0 ...)"
            )
        torch.cuda.set_device(index)  # the allocator counters read the current device
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
