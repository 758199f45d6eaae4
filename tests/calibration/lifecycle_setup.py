"""Shared set-up of the lifecycle tests: the tiny FLUX, its formulas, a calibration measured once.

A module of its own so that the gloo workers (spawned processes) import the same set-up.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from calibration.examples import EXAMPLES
from calibration.lifecycle.faults import Fault, FaultyBackend
from calibration.lifecycle.run import Outcome, run_lifecycle
from calibration.lifecycle.steps import Points, Settings
from calibration.plan.model import Device
from calibration.run import Calibration, calibrate_session, load_pipeline, shapes
from calibration.session import Session
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


def points() -> Points:
    """The warmup, probe and target as complete points."""
    target, probe, warmup = shapes(formulas(), FLUX.shapes, target=TARGET, probe=PROBE)
    return Points(warmup, probe, target)


def session(faults: Sequence[Fault] = ()) -> tuple[Session, FaultyBackend]:
    """A fresh tiny FLUX on the CPU, recorded through the exact CPU backend with ``faults``."""
    backend = FaultyBackend(LiveTensorBackend(), tuple(faults))
    pipe = FLUX.build(0)
    built = Session(pipe, formulas(), "cpu", call_kwargs=FLUX.call_kwargs, backend=backend)  # type: ignore[arg-type]
    backend.watch(built.recorder)
    return built, backend


@functools.cache
def calibration() -> Calibration:
    """One calibration of the tiny FLUX (a round, no time probe), shared by the tests."""
    measured, _ = session()
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
) -> tuple[Outcome, Session]:
    """The lifecycle on a fresh pipeline with ``faults``, from the shared calibration."""
    fresh, _ = session(faults)
    settings = Settings(device, mode, max_replans=max_replans, agreement=agreement)
    return run_lifecycle(fresh, points(), settings, calibration=calibration()), fresh
