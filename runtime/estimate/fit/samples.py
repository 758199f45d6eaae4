"""The one definition of what a record says about a stage: how often it ran, its memory above the
request's baseline, and its steady time per iteration.

Calibrate, its checks, the time estimate and ``dslc infer`` all read a stage through
``stage_sample``, so a formula is fitted to, and checked against, the same quantity everywhere:

- **count**: the iterations the recorder counted, else the formula's (``declared``);
- **memory above baseline**: the highest peak of the phase (a stage's own, or one of its setup or
  component phases) minus the request's baseline before it;
- **steady time per iteration**: for a stage whose iterations were recorded, the *median* of its
  iterations *after the first*. The first iteration pays one-time costs (allocations later ones
  reuse, lazy initialisation, a kernel's first dispatch): averaged in, they add ``first / n`` to
  every iteration, a term in ``1 / steps`` that no formula has, so a two-step and a twenty-step
  size would disagree on the same stage. A median, not a mean, because another process on a shared
  core lands as a burst in one iteration: the mean takes it in, the median skips it. A one-shot
  stage (no iterations recorded) has its duration over its count. One sample a run: the
  iterations of one run are slow or fast together, so they are not independent samples.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from attrs import frozen

from runtime.kinds import PhaseKind
from runtime.record import WarmupRecord


@frozen
class StageSample:
    """One record's stage: count, memory above baseline, steady seconds per iteration."""

    count: int
    memory: int | None  # bytes above the request's baseline (None: the phase did not open)
    seconds: float | None  # steady seconds per iteration (None: the stage did not run)
    steps: tuple[float, ...] = ()  # the steady iterations' seconds (a repeated stage)
    fixed_s: float = 0.0  # the stage's time outside its iterations (a repeated stage)
    repeated: bool = False  # its iterations were recorded one by one


def counted(record: WarmupRecord, stage: str, declared: int) -> int:
    """How often the stage's unit ran in the record: as recorded, else ``declared``."""
    for pair in record.stage_iterations:
        if pair.stage == stage:
            return pair.measured
    return declared


def memory_above_baseline(
    record: WarmupRecord, stage: str, kind: str = PhaseKind.STAGE, name: str | None = None
) -> int | None:
    """The highest peak of the phase ``(kind, name)`` of ``stage`` above the request's baseline."""
    wanted = stage if name is None else name
    peaks = [
        p.peak_allocated
        for p in record.phases
        if p.kind == kind and p.name == wanted and p.stage == stage
    ]
    return record.above_baseline(max(peaks)) if peaks else None


def steady_steps(record: WarmupRecord, stage: str) -> tuple[tuple[float, ...], float] | None:
    """A repeated stage's steady iterations (the first dropped when there are more) and its time
    outside its iterations; None when no iteration was recorded or the stage did not run."""
    durations = record.stage_durations
    steps = [
        i.duration_s
        for i in sorted((i for i in record.iterations if i.stage == stage), key=lambda i: i.index)
    ]
    if stage not in durations or not steps:
        return None
    steady = steps[1:] if len(steps) > 1 else steps
    return tuple(steady), max(0.0, durations[stage] - sum(steps))


def stage_sample(
    record: WarmupRecord,
    stage: str,
    declared: int,
    kind: str = PhaseKind.STAGE,
    name: str | None = None,
) -> StageSample:
    """The stage as ``record`` saw it (see the module docstring); ``declared`` is the formula's
    iteration count at the record's params, ``(kind, name)`` the phase whose memory is read."""
    count = counted(record, stage, declared)
    memory = memory_above_baseline(record, stage, kind, name)
    repeated = steady_steps(record, stage)
    if repeated is not None:
        steps, fixed = repeated
        return StageSample(count, memory, statistics.median(steps), steps, fixed, True)
    if stage not in record.stage_durations or count <= 0:
        return StageSample(count, memory, None)
    return StageSample(count, memory, record.stage_durations[stage] / count)


def medians(samples: Sequence[StageSample]) -> list[float]:
    """The steady seconds of the samples that ran."""
    return [s.seconds for s in samples if s.seconds is not None]


Layout = tuple[str, ...]


def phase_layout(record: WarmupRecord, stage: str, kind: str, name: str) -> Layout | None:
    """The components active in the phase ``(kind, name)`` of ``stage`` (sorted): records whose
    layouts differ are fitted apart, never scaled from one layout to another."""
    for p in record.phases:
        if p.kind == kind and p.name == name and p.stage == stage:
            return tuple(sorted(p.active_components))
    return None
