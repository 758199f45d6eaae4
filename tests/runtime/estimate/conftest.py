"""Fixtures for the estimator tests: a toy pipeline compiled from text, and hand-made warmup
records.

Every number in these tests is computed by hand from the records built here, so a rule of
runtime.estimate is checked against arithmetic, not against itself.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from artifact.point import Point
from runtime import Pipeline
from runtime.record import ErrorInfo, Iteration, LayerUse, Phase, StageIterations, WarmupRecord

TOY = """
pipeline toy {
    param steps: int = 10 in [1, 1000]
    param size: int = 100 in [1, 100000]
    param blocks: int = 1 in [1, 64]

    stage TextEncodingStage { iterations = 1 }
    stage DenoisingStage {
        iterations = steps * blocks
        memory ~ size
        time ~ size
    }
    stage DecodingStage {
        memory ~ 2 * size
        time ~ size
    }
}
"""


@pytest.fixture(scope="session")
def toy() -> Pipeline:
    """The toy pipeline, compiled by dslc and loaded by the runtime exactly as an artifact is."""
    from dslc.build import load_text

    return load_text(TOY, "toy.wf")["toy"]


def phase(
    kind: str,
    name: str,
    stage: str | None,
    peak: int,
    *,
    before: int = 0,
    duration: float = 0.0,
    active: Iterable[str] = (),
    used: Iterable[str] | None = None,
) -> Phase:
    active = tuple(active)
    return Phase(
        kind,
        name,
        stage,
        1,
        before,
        peak,
        peak,
        duration,
        active,
        active if used is None else tuple(used),
    )


def stage(name: str, peak: int, duration: float = 0.0, active: Iterable[str] = ()) -> Phase:
    return phase("stage", name, name, peak, duration=duration, active=active)


def record(
    params: Point,
    *,
    phases: Iterable[Phase] = (),
    iterations: Iterable[Iteration] = (),
    baseline: int = 1000,
    peak: int | None = None,
    duration: float = 0.0,
    stage_iterations: Iterable[StageIterations] = (),
    layer_uses: Iterable[LayerUse] = (),
    error: str | None = None,
    pipeline: str = "toy",
    defaults: Point | None = None,
) -> WarmupRecord:
    phases = tuple(phases)
    full = {**({"steps": 10, "size": 100, "blocks": 1} if defaults is None else defaults), **params}
    top = peak if peak is not None else max([baseline, *(p.peak_allocated for p in phases)])
    return WarmupRecord(
        pipeline=pipeline,
        device="cpu",
        backend="test",
        params=full,
        error=None if error is None else ErrorInfo("torch.OutOfMemoryError", error),
        baseline_allocated=baseline,
        peak_allocated=top,
        peak_reserved=top,
        duration_s=duration,
        phases=phases,
        iterations=tuple(iterations),
        stage_iterations=tuple(stage_iterations),
        layer_uses=tuple(layer_uses),
    )


def steps(
    stage_name: str, durations: Iterable[float] = (), peaks: Iterable[int] | None = None
) -> list[Iteration]:
    """Iterations 0, 1, ... of one stage with the given durations (and peaks)."""
    durations = list(durations)
    peaks = list(peaks) if peaks is not None else [0] * len(durations)
    if not durations:
        durations = [0.0] * len(peaks)
    return [Iteration(stage_name, i, p, p, d) for i, (d, p) in enumerate(zip(durations, peaks))]
