"""Shared set-up of the lifecycle tests: the tiny FLUX, its formulas, a calibration measured once.

A module of its own so that the gloo workers (spawned processes) import the same set-up.
"""

from __future__ import annotations

import copyreg
import functools
import io
import json
import pickle
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import MappingProxyType

from calibration.calibrate.run import Calibration, calibrate_session, load_pipeline, shapes
from calibration.core.session import Session
from calibration.core.shapes import Shapes
from calibration.examples import EXAMPLES
from calibration.lifecycle.faults import Fault, FaultyBackend
from calibration.lifecycle.run import Outcome, run_lifecycle
from calibration.lifecycle.steps import Settings
from calibration.plan.model import Device
from runtime import Pipeline
from runtime.measure.backends import LiveTensorBackend
from runtime.measure.distributed import LOCAL, Agreement

FLUX = EXAMPLES["flux"]
FORMULAS = Path(__file__).resolve().parents[2] / "formulas"
#: The docs' small FLUX run: a probe at 32x32, the target (the warmup too) at 64x64, two steps.
PROBE = {"steps": 1, "height": 32, "width": 32}
TARGET = {"steps": 2, "height": 64, "width": 64}
#: At 1 MiB without reserve the plan streams one of the transformer's two blocks.
STREAMING = Device(1 << 20, reserve_bytes=0)


@functools.cache
def formulas() -> Pipeline:
    """formulas/flux.wf's FLUX.1 [dev], compiled once."""
    return load_pipeline(FORMULAS / FLUX.formula_file, FLUX.pipeline)


def points() -> Shapes:
    """The warmup, probe and target as complete points."""
    return shapes(formulas(), FLUX.shapes, target=TARGET, probe=PROBE)


class Steady:
    """A clock that advances one millisecond a reading, whatever runs in between (``jump`` adds
    more): the tests that are not about speed get the same times under any load, so a loaded
    machine never makes their validation ``slower``; tests/calibration/lifecycle/test_speed.py
    reads the real clock (this thread's CPU time)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1e-3
        return self.now

    def jump(self, seconds: float) -> None:
        self.now += seconds


#: ``clock=REAL``: the recorder's own clock on the CPU (this thread's CPU time).
REAL = "auto"


def session(
    faults: Sequence[Fault] = (), clock: Callable[[], float] | str | None = None
) -> tuple[Session, FaultyBackend]:
    """A fresh tiny FLUX on the CPU, recorded through the exact CPU backend with ``faults``, on
    ``clock`` (None: a fresh ``Steady``)."""
    backend = FaultyBackend(LiveTensorBackend(), tuple(faults))
    pipe = FLUX.build(0)
    built = Session(
        pipe,  # type: ignore[arg-type]
        formulas(),
        "cpu",
        call_kwargs=FLUX.call_kwargs,
        backend=backend,
        clock=Steady() if clock is None else clock,
    )
    backend.watch(built.recorder)
    return built, backend


def calibration(clock: str | None = None) -> Calibration:
    """One calibration of the tiny FLUX (a round, no time probe), shared by the tests: on a
    ``Steady`` clock (in a spawned rank, the one its test handed over), or (``REAL``) the real
    one."""
    if clock is None and _HANDED:
        return _HANDED[0]
    return _calibrated(clock)


@functools.cache
def _calibrated(clock: str | None) -> Calibration:
    measured, _ = session(clock=clock)
    p = points()
    return calibrate_session(
        measured, target=p.target, probe=p.probe, warmup=p.warmup, repeat=1, time_tolerance=None
    )


def lifecycle(
    faults: Sequence[Fault] = (),
    *,
    mode: str = "apply",
    device: Device = STREAMING,
    max_replans: int = 2,
    agreement: Agreement = LOCAL,
    clock: Callable[[], float] | str | None = None,
) -> tuple[Outcome, Session]:
    """The lifecycle on a fresh pipeline with ``faults``, from the shared calibration (on the
    real clock when ``clock`` is ``REAL``, else on a ``Steady`` one)."""
    fresh, _ = session(faults, clock)
    settings = Settings(device, mode, max_replans=max_replans, agreement=agreement)
    cal = calibration(REAL if clock == REAL else None)
    return run_lifecycle(fresh, points(), settings, calibration=cal), fresh


#: The ``Steady`` calibration a spawned rank took over from its test (``take_over``).
_HANDED: list[Calibration] = []
#: The file in a test's folder that hands its calibration to the ranks it spawns.
HANDED = "calibration.pickle"


def _proxy(items: dict[object, object]) -> MappingProxyType[object, object]:
    return MappingProxyType(items)


class _Pickler(pickle.Pickler):
    """Pickles the estimate's read-only mappings (``MappingProxyType``) as the dicts they wrap."""

    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[MappingProxyType] = lambda m: (_proxy, (dict(m),))


def hand_over(folder: Path) -> None:
    """Write this process's ``Steady`` calibration where the ranks ``take_over`` it: each rank of
    each case measured the same tiny FLUX again before (the same calibration, on a steady
    clock), the most of its time."""
    buffer = io.BytesIO()
    _Pickler(buffer).dump(calibration())
    (folder / HANDED).write_bytes(buffer.getvalue())


def take_over(folder: str) -> None:
    """In a spawned rank: ``calibration()`` is the one its test handed over (``hand_over``)."""
    _HANDED[:] = [pickle.loads(Path(folder, HANDED).read_bytes())]


def run_ranks(
    worker: Callable[..., None], folder: Path, guard_s: float, ranks: int = 2
) -> list[dict]:
    """``worker(rank, ranks, port, folder)`` in ``ranks`` gloo processes; each rank's JSON
    (``folder/rankN.json``), after at most ``guard_s`` seconds (a hang guard, not a bound)."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.spawn(worker, args=(ranks, port, str(folder)), nprocs=ranks, join=False)
    deadline = time.monotonic() + guard_s
    while not context.join(timeout=1):
        assert time.monotonic() < deadline, "ranks did not finish"
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(ranks)]
