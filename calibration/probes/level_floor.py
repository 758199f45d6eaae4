"""Where a weights level's floor sets a phase's bound: the sizes that read it nearer the target.

Under offload a phase is estimated per weights level, and a level's bound is at least the phase's
own activations' bound less the gap between the two at the size nearest the target
(``runtime.estimate.level_peaks._covered``). That gap grows with size where a level grows slower
than the phase's activations (SD 1.5's UNet: 64 MB at [3200, 3200], 164 MB at the target), so the
floor read at a small size lies well over the level (the tiny SDXL's UNet: +6.98 % where its own
fit is exact). A size nearer the target makes the gap, and the bound, honest at no risk: the
floor stays a floor, read where the level stands nearer. Chosen from the formulas and the estimate
alone, like every memory size.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from artifact.point import Point
from calibration.probes.policy import memory_terms, work
from calibration.probes.sizes import ladder, towards
from calibration.probes.time_probe import covers_memory
from runtime import Pipeline
from runtime.estimate import PhaseEstimate
from runtime.estimate.peak_fit import relative_size
from runtime.record import WarmupRecord


def floored(phases: Sequence[PhaseEstimate]) -> tuple[str, ...]:
    """The stages with a phase whose bound a level's floor lifted over the level's own padded fit
    by more than that fit's padding (what the stage margin added): where the floor, not the fit,
    sets the bound."""
    out: list[str] = []
    for phase in phases:
        peak = phase.peak
        if phase.stage is None or peak.lift_bytes <= 0 or peak.raw_bytes is None:
            continue
        padded = (peak.bound_bytes or 0) - peak.lift_bytes  # the level's own padded fit
        if peak.lift_bytes > max(padded - peak.raw_bytes, 0) and phase.stage not in out:
            out.append(phase.stage)
    return tuple(out)


def nearness(pipeline: Pipeline, stages: Sequence[str], size: Point, target: Point) -> Fraction:
    """How near ``size`` lies to the target in the stages' memory terms: the least of their
    term ratios' sums (``relative_size``), each over its number of terms (1: the target)."""
    out: Fraction | None = None
    for stage in stages:
        want = memory_terms(pipeline, stage, target)
        ratios, _ = relative_size(memory_terms(pipeline, stage, size), want)
        share = ratios / max(sum(1 for w in want if w), 1)
        out = share if out is None else min(out, share)
    return out if out is not None else Fraction(0)


def nearer_sizes(
    pipeline: Pipeline,
    stages: Sequence[str],
    records: Sequence[WarmupRecord],
    measured: Sequence[Point],
    probe: Point,
    target: Point,
) -> list[dict[str, int | bool]]:
    """Unmeasured sizes nearer the target than every one of ``measured`` in the stages' memory
    terms, on the grid the loop's other sizes lie on (the probe moved halfway, three quarters or
    all of the way to the target, each param alone and together: ``towards``, ``ladder``; a size
    halfway from a near one to the target sets an odd latent side, where the tiny SDXL's UNet
    leaves its formula), each also with the params those terms do not read at their smallest
    measured value (``_lightened``); never past the target (lighter than it in work and in every
    growing stage's memory, ``covers_memory``): the nearest first, the cheapest of equals.
    ``records`` are every size measured (which stages' memory grows)."""
    if not stages or not measured:
        return []
    now = max(nearness(pipeline, stages, m, target) for m in measured)
    heaviest = work(pipeline, target)
    seen = {tuple(sorted(dict(m).items())) for m in (*measured, *(r.params for r in records))}
    grid = [*towards(pipeline, probe, target), *ladder(pipeline, probe, target)]
    out: list[dict[str, int | bool]] = []
    for c in [*grid, *(_lightened(pipeline, stages, m, measured) for m in grid)]:
        key = tuple(sorted(c.items()))
        if (
            key not in seen
            and nearness(pipeline, stages, c, target) > now
            and work(pipeline, c) < heaviest
            and not covers_memory(pipeline, c, target, records)
        ):
            seen.add(key)
            out.append(c)
    return sorted(out, key=lambda c: (-nearness(pipeline, stages, c, target), work(pipeline, c)))


def _lightened(
    pipeline: Pipeline, stages: Sequence[str], size: Point, measured: Sequence[Point]
) -> dict[str, int | bool]:
    """``size`` with each int param the stages' memory terms do not read there at its smallest
    measured value: the same level read at less cost, in a regime the sizes have shown (the tiny
    SDXL at one step, below every size measured, holds less in its UNet's last block and its
    denoising set-up than at two or more: the first step is not the steady one)."""
    out = dict(size)
    terms = {stage: memory_terms(pipeline, stage, size) for stage in stages}
    for name, value in size.items():
        values = [m[name] for m in measured if name in m]
        if isinstance(value, bool) or any(isinstance(v, bool) for v in values) or not values:
            continue
        lighter = {**out, name: min(int(v) for v in values)}
        if (
            lighter[name] < value
            and pipeline.is_admissible(**lighter)
            and all(memory_terms(pipeline, s, lighter) == t for s, t in terms.items())
        ):
            out = lighter
    return out
