"""The tiny FLUX worker the HTTP tests serve with, booted once (the lifecycle, then serving)."""

from __future__ import annotations

import functools
import threading
from pathlib import Path

from artifact.point import Point
from calibration.cli.options import Choice
from calibration.cli.serve_boot import Boot, boot
from calibration.core.config import RunConfig
from calibration.core.shapes import Shapes
from calibration.serve.admitted import AdmittedWorker
from calibration.serve.answer import Answer
from runtime import Pipeline
from tests.calibration.lifecycle_setup import PROBE, STREAMING, TARGET

FORMULAS = Path(__file__).resolve().parents[3] / "formulas"
BOOT = Boot(
    Choice("flux", None, FORMULAS, None),
    Shapes({}, PROBE, TARGET),
    RunConfig(device="cpu", repeat=1),
    STREAMING,
)


@functools.cache
def worker() -> AdmittedWorker:
    """The tiny FLUX, validated on the 1 MiB streaming plan, shared by the tests (never closed)."""
    return boot(BOOT)


class Gated:
    """The shared worker behind a gate: each request waits for ``gate`` (a busy worker, on cue);
    ``close`` leaves the shared one as it is."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.inner, self.gate = worker(), gate or threading.Event()
        self.started = threading.Event()
        self.closed = False
        if gate is None:
            self.gate.set()

    @property
    def pipeline(self) -> Pipeline:
        return self.inner.pipeline

    @property
    def defaults(self) -> Point:
        return self.inner.defaults

    def serve(self, params: Point) -> Answer:
        self.started.set()
        self.gate.wait()
        return self.inner.serve(params)

    def idle(self) -> bool:
        return self.inner.idle()

    def close(self) -> None:
        self.closed = True
