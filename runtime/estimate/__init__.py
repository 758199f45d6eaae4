"""Estimators: warmup records + a compiled pipeline -> frozen estimates at a target workload.

Pure functions (no torch, no I/O). The target is the pipeline's default workload, or any admissible
point given as overrides of it. Every figure says how it was obtained (``method``: measurement,
fit, scaled or none, with a ``reason``) and which margin is in force. See docs/estimators.md.

::

    from runtime import load_formulas
    from runtime.estimate import estimate

    wan = load_formulas("build/formulas.json")["wan2_1_t2v_14b"]
    result = estimate(recorder.records, wan)                     # the default workload
    result = estimate(records, wan, target={"steps": 8, "frames": 17, "height": 64, "width": 64})
    result.request_peak.bound_bytes      # the request's peak, margin applied
    result.phase("stage:DenoisingStage").peak.raw_bytes
    result.timing.seconds

Each ``estimate_*`` entry point below computes one part of ``estimate`` (at any target, the
default workload when none is given).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from artifact.point import Point
from runtime.estimate.fit.model import Modeler
from runtime.estimate.layers import layer_uses
from runtime.estimate.peaks import iteration_growth, phase_peaks, request_peak
from runtime.estimate.points import (
    Workload,
    margin_fraction,
    resolve_target,
)
from runtime.estimate.results import (
    DEFAULT_MARGIN,
    METHODS,
    IterationGrowth,
    LayerUseEstimate,
    LinearFit,
    MeasuredPoint,
    PeakEstimate,
    PhaseEstimate,
    PlaneFit,
    StageTime,
    TimingEstimate,
    WorkloadEstimate,
)
from runtime.estimate.timing import request_time
from runtime.formulas import Pipeline
from runtime.record import WarmupRecord

__all__ = [
    "DEFAULT_MARGIN",
    "METHODS",
    "IterationGrowth",
    "LayerUseEstimate",
    "LinearFit",
    "MeasuredPoint",
    "PeakEstimate",
    "PhaseEstimate",
    "PlaneFit",
    "StageTime",
    "TimingEstimate",
    "WorkloadEstimate",
    "estimate",
    "estimate_iteration_growth",
    "estimate_layerwise_layer_uses",
    "estimate_peak_bytes",
    "estimate_phase_peaks",
    "estimate_timing",
    "resolve_target",
]

Records = Iterable[WarmupRecord]
Target = Point | None
Weights = Mapping[str, int] | None


def estimate(
    records: Records,
    pipeline: Pipeline,
    target: Target = None,
    margin: float | Fraction = DEFAULT_MARGIN,
    *,
    component_weight_bytes: Weights = None,
    stage_margins: Mapping[str, float | Fraction] | None = None,
    modeler: Modeler | None = None,
) -> WorkloadEstimate:
    """Everything at once: phase peaks, the request's peak, timing, layer uses and growth.

    ``pipeline`` is a loaded ``runtime.Pipeline``; ``target`` overrides its default workload (an
    inadmissible point raises the loader's error); ``margin`` (>= 1) pads what is extrapolated,
    ``stage_margins`` overrides it for the phases of some stages (a calibration whose sizes confirm
    a stage's terms pads it less); ``component_weight_bytes`` floors each phase's constant part at
    its active components' weights; ``modeler`` fits the peaks (margin aside) and the time planes (a
    calibration's cache reads a fit made before, whatever the margin). Records of another pipeline
    raise ``RecordMismatchError`` (a ``ValueError``).
    """
    work = Workload(records, pipeline, target)
    exact = margin_fraction(margin)
    margins = {s: margin_fraction(m) for s, m in (stage_margins or {}).items()}
    weights = dict(component_weight_bytes or {})
    growth = iteration_growth(work)
    phases = phase_peaks(work, exact, weights, growth, margins, modeler)
    return WorkloadEstimate(
        pipeline=pipeline.name,
        target=work.target,
        margin=float(exact),
        phases=phases,
        request_peak=request_peak(work, exact, weights, growth, phases, margins, modeler),
        timing=request_time(work, modeler),
        layer_uses=layer_uses(work),
        growth=growth,
        records_used=len(work.ok),
        records_dropped=len(work.dropped),
    )


def estimate_phase_peaks(
    records: Records,
    pipeline: Pipeline,
    target: Target = None,
    margin: float | Fraction = DEFAULT_MARGIN,
    *,
    component_weight_bytes: Weights = None,
) -> tuple[PhaseEstimate, ...]:
    """Each measured phase at the target; phases of different component layouts stay separate."""
    work = Workload(records, pipeline, target)
    return phase_peaks(
        work, margin_fraction(margin), dict(component_weight_bytes or {}), iteration_growth(work)
    )


def estimate_peak_bytes(
    records: Records,
    pipeline: Pipeline,
    target: Target = None,
    margin: float | Fraction = DEFAULT_MARGIN,
    *,
    component_weight_bytes: Weights = None,
) -> PeakEstimate:
    """The request's overall peak at the target (at least every phase's)."""
    work = Workload(records, pipeline, target)
    exact, weights = margin_fraction(margin), dict(component_weight_bytes or {})
    growth = iteration_growth(work)
    return request_peak(work, exact, weights, growth, phase_peaks(work, exact, weights, growth))


def estimate_timing(
    records: Records, pipeline: Pipeline, target: Target = None, modeler: Modeler | None = None
) -> TimingEstimate:
    """The request's and each stage's duration at the target (planes fitted by ``modeler``)."""
    return request_time(Workload(records, pipeline, target), modeler)


def estimate_layerwise_layer_uses(
    records: Records, pipeline: Pipeline, target: Target = None
) -> tuple[LayerUseEstimate, ...]:
    """Per (component, layer, stage) calls at the target."""
    return layer_uses(Workload(records, pipeline, target))


def estimate_iteration_growth(
    records: Records, pipeline: Pipeline, target: Target = None
) -> tuple[IterationGrowth, ...]:
    """Stages whose per-iteration peaks grow, extrapolated to the target's last iteration."""
    return iteration_growth(Workload(records, pipeline, target))
