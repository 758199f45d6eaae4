"""What a predictor is built from: a calibration's estimate at its target and what it measured
with (weights, each phase's weights at its peak, margins), from memory or from a saved document.

A ``--save``d document (``dslc calibrate --save``) holds each phase's figures at the target, the
components' layers and block groups (read as the planner reads them, ``calibration.plan.inputs``;
a document written before ``group_bytes`` has none: nothing is planned grouped) and marks the
records its estimate used, but not their measurements; its ``--records`` file holds them.
``from_document`` reads both strictly, estimates again from the records and insists that every
phase's bound is the document's (records of another calibration are a
``CalibrationFormatError``, never a silently different predictor).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from attrs import evolve, field, frozen

from artifact.spelling import path_text
from calibration.plan.document_check import DocumentError, check_document, read_document
from calibration.plan.inputs import (
    MAX_ITEMS,
    CalibrationFormatError,
    CalibrationLike,
    Json,
    components_from_bytes,
    group_sizes,
)
from calibration.plan.model import PlanInputError
from runtime import FormulaError, Pipeline
from runtime.estimate import WorkloadEstimate, estimate
from runtime.kinds import EARNED, MarginSource
from runtime.record import WarmupRecord


class StageMargined(Protocol):
    """A stage's margin (``calibration.probes.evidence.StageMargin``)."""

    @property
    def stage(self) -> str: ...
    @property
    def margin(self) -> float: ...
    @property
    def source(self) -> MarginSource: ...


class CalibrationSource(CalibrationLike, Protocol):
    """What a predictor reads of a ``calibration.calibrate.run.Calibration``: what the planner
    reads (``calibration.plan.inputs.CalibrationLike``) and each stage's margin."""

    @property
    def margins(self) -> Sequence[StageMargined]: ...


def _ints(value: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(value))


def _layers(value: Mapping[str, Mapping[str, int]]) -> Mapping[str, Mapping[str, int]]:
    return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in value.items()})


def _groups(value: Mapping[str, Sequence[int]]) -> Mapping[str, tuple[int, ...]]:
    return MappingProxyType({k: tuple(v) for k, v in value.items()})


def _floats(value: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(value))


@frozen
class Basis:
    """A calibration as a predictor reads it."""

    estimate: WorkloadEstimate
    component_weight_bytes: Mapping[str, int] = field(converter=_ints, hash=False)
    layer_bytes: Mapping[str, Mapping[str, int]] = field(converter=_layers, hash=False)
    phase_weights: Mapping[str, int] = field(converter=_ints, hash=False)
    unobserved: tuple[str, ...]
    stage_margins: Mapping[str, float] = field(converter=_floats, hash=False)  # by evidence
    #: each component's block groups (``calibration.plan.model.Component.group_bytes``): the
    #: planner offers the grouped placement only to a component with some
    group_bytes: Mapping[str, tuple[int, ...]] = field(converter=_groups, hash=False, factory=dict)

    @classmethod
    def of(cls, cal: CalibrationSource) -> Basis:
        """A calibration in memory."""
        return cls(
            cal.estimate,
            cal.component_weight_bytes,
            cal.layer_bytes,
            cal.phase_weights,
            tuple(cal.unobserved),
            {m.stage: m.margin for m in cal.margins if m.source in EARNED},
            cal.group_bytes,
        )


def from_document(
    source: str | Path | Mapping[str, Json], records: Sequence[WarmupRecord], pipeline: Pipeline
) -> Basis:
    """A saved calibration document (checked against its schema) and its ``--records`` file
    (``runtime.record.load_records``). The document marks each record its estimate used
    (``records[i].estimated``), so the whole file is given and those are taken, each checked
    against the document's params; a document without the marks (written before them) takes
    ``records`` as the ones its estimate used: the file less the target's verification runs and
    the sizes a finding put outside the formulas' regime."""
    where = "" if isinstance(source, Mapping) else f" {path_text(source)}"
    try:
        doc = source if isinstance(source, Mapping) else read_document(source)
        check_document(doc)
        return _basis(doc, records, pipeline)
    except DocumentError as exc:
        raise CalibrationFormatError(f"calibration document{where}: {exc}") from None
    except (FormulaError, PlanInputError) as exc:
        raise CalibrationFormatError(f"calibration document{where}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CalibrationFormatError(
            f"calibration document{where}: {type(exc).__name__}: {exc}"
        ) from None


def _basis(doc: Mapping[str, Json], records: Sequence[WarmupRecord], pipeline: Pipeline) -> Basis:
    if len(records) > MAX_ITEMS:
        raise ValueError(f"{len(records)} records; at most {MAX_ITEMS}")
    if doc["pipeline"] != pipeline.name:
        raise ValueError(f"it is of pipeline {doc['pipeline']!r}, not {pipeline.name!r}")
    weights = {str(k): int(v) for k, v in doc["component_weight_bytes"].items()}
    layers = {
        str(c): {str(n): int(b) for n, b in per.items()} for c, per in doc["layer_bytes"].items()
    }
    groups = group_sizes(doc)  # the planner's own reading: counted, typed, none in an older one
    components_from_bytes(weights, layers, groups)  # the planner's check: no unknown component
    margins = {
        str(m["stage"]): float(m["margin"])
        for m in doc.get("margins", ())
        if m.get("source") in EARNED
    }
    estimated = estimate(
        list(estimate_records(doc, records)),
        pipeline,
        target=dict(doc["target"]),
        margin=float(doc["margin"]),
        component_weight_bytes=weights,
        stage_margins=margins,
    )
    estimated = _with_risks(doc, estimated)
    phases = doc["phases"]
    return Basis(
        estimated,
        weights,
        layers,
        {str(p["label"]): int(p["weights_bytes"]) for p in phases if p.get("weights_bytes")},
        tuple(str(n) for n in doc.get("unobserved_components", ())),
        margins,
        groups,
    )


def estimate_records(
    doc: Mapping[str, Json], records: Sequence[WarmupRecord]
) -> Sequence[WarmupRecord]:
    """The records the document's estimate used (see ``from_document``): those its entries mark,
    the ``--records`` file's first entries in order, each at the params its entry names."""
    entries = doc.get("records")
    if not isinstance(entries, list) or not entries:
        return records
    if not all(isinstance(e, dict) and "estimated" in e for e in entries):
        return records  # written before the marks: ``records`` are the estimate's
    if len(records) < len(entries):
        raise ValueError(
            f"{len(records)} records for the document's {len(entries)}: give the --records "
            "file saved with this calibration"
        )
    for i, (entry, record) in enumerate(zip(entries, records)):
        if "params" in entry and dict(entry["params"]) != dict(record.params):
            raise ValueError(
                f"record {i} is at {dict(record.params)}, the document's records[{i}] at "
                f"{dict(entry['params'])}: give the --records file saved with this calibration"
            )
    return [r for e, r in zip(entries, records) if e["estimated"]]


def _with_risks(doc: Mapping[str, Json], estimated: WorkloadEstimate) -> WorkloadEstimate:
    """The records' estimate, which must be the document's phase by phase, with the risk its
    findings added to a stage's bounds (``calibration.probes.evidence.with_risks``: one
    non-negative amount, the same for every phase of the stage) taken from the document."""
    saved = {str(p["label"]): p for p in doc["phases"]}
    risks: dict[str | None, set[int]] = {}
    differ = sorted(set(saved) ^ {p.label for p in estimated.phases})
    for p in estimated.phases:
        s = saved.get(p.label)
        if s is None:
            continue
        bound = s.get("bound_peak_bytes")
        if s.get("predicted_peak_bytes") != p.peak.raw_bytes or (bound is None) != (
            p.peak.bound_bytes is None
        ):
            differ.append(p.label)
        elif bound is not None and p.peak.bound_bytes is not None:
            risks.setdefault(p.stage, set()).add(int(bound) - p.peak.bound_bytes)
    differ += sorted(
        p.label
        for p in estimated.phases
        if len(risks.get(p.stage, ())) > 1 or min(risks.get(p.stage, {0})) < 0
    )
    if differ:
        shown = ", ".join(sorted(set(differ)))
        raise ValueError(
            f"the records do not give the document's estimate (phases {shown} differ): give the "
            "--records file saved with this calibration"
        )
    phases = tuple(
        p
        if p.peak.bound_bytes is None or not max(risks.get(p.stage, {0}))
        else evolve(p, peak=evolve(p.peak, bound_bytes=p.peak.bound_bytes + max(risks[p.stage])))
        for p in estimated.phases
    )
    return evolve(estimated, phases=phases)
