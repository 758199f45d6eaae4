"""What a size costs next to the target: iterations x memory measure of the most repeated stage."""

from __future__ import annotations

from fractions import Fraction

from artifact.point import Point
from runtime import Pipeline


def work_ratio(pipeline: Pipeline, probe: Point, target: Point) -> Fraction:
    """Target / probe in iterations x memory measure of the most repeated stage (tokens x steps)."""
    at_target, at_probe = pipeline.evaluate(**target), pipeline.evaluate(**probe)
    stage = max(pipeline.stages, key=lambda s: at_target[s].iterations)
    probe_work = at_probe[stage].iterations * at_probe[stage].memory
    if probe_work == 0:
        return Fraction(0)
    return Fraction(at_target[stage].iterations * at_target[stage].memory) / Fraction(probe_work)


def relative_cost(pipeline: Pipeline, point: Point, target: Point) -> Fraction:
    """What one run at ``point`` costs next to the target: iterations x memory measure of the
    target's most repeated stage, at both (the work ratio's measure)."""
    ratio = work_ratio(pipeline, point, target)
    return Fraction(1) / ratio if ratio else Fraction(0)
