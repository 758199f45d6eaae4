"""Planner inputs from a calibration: a ``WorkloadEstimate`` in memory, or a saved JSON document.

A phase's peak holds the weights that were on the device then and its activations; the planner
re-places the weights, so a phase's bound for planning is its bound minus those weights: the
phase's own ``weights_bytes`` (measured under the calibration's placement, offloaded or not), else
``measured_weights_bytes``, else the sum of ``component_weight_bytes`` (everything on the device).
A component no phase saw active (``unobserved_components``) is charged its full weights in every
phase: it may run in any of them, and is never planned as costing nothing. No torch: the per-layer
bytes come from ``calibration.core.weights.layer_bytes`` (or the document's ``layer_bytes``).

Two more inputs per phase (docs/planning.md "Where each input comes from"): its
``transition_bytes``, derived wherever an active component may stream (it has layers): the bound
plus the largest such layer, the one still held while the next arrives (the bound alone when the
calibration streamed block by block, ``STREAMED_UNDER``: its peaks measured the arrivals); and its
``whole_components``, from ``Whole`` (``dslc plan --whole STAGE=COMPONENT``: the phases of that
stage need the component's full weights, a weight refresh or a LoRA load).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from attrs import frozen

from artifact.point import Point
from artifact.spelling import path_text, point_text
from calibration.plan.document_check import (
    DocumentError,
    check_document,
    read_document,
)
from calibration.plan.model import Component, Phase, PlanInputError, Target
from runtime.kinds import PhaseKind

if TYPE_CHECKING:
    from runtime.estimate import WorkloadEstimate

#: A parsed JSON value: a saved document is read by duck typing, its shape checked as it is read
#: (a wrong one is a ``CalibrationFormatError``), so no static type can say more.
Json = Any

MAX_ITEMS = 100_000  # phases, layer uses and layers, each


class CalibrationFormatError(PlanInputError):
    """A calibration document that cannot be read as one (not JSON, a key missing, a bad value)."""


class UnknownWholeError(PlanInputError):
    """A ``--whole STAGE=COMPONENT`` naming a stage or a component the calibration does not have
    (the message names the known ones)."""


#: Full-weight needs, each (stage, component): the stage's phases need the component whole.
Whole = tuple[tuple[str, str], ...]

#: The placements calibrated under (``--calibrate-offload``, ``calibration.core.offload.Offload``
#: values: this module cannot import it) that stream a component block by block while measuring:
#: each phase's measured peak is then a layer's arrival already, and its transition adds nothing.
STREAMED_UNDER = frozenset({"group"})


@frozen
class Calibrated:
    """What one calibration gives the planner: the components and the target it was estimated at."""

    components: tuple[Component, ...]
    target: Target


def components_from_bytes(
    component_weight_bytes: Mapping[str, int],
    layer_bytes: Mapping[str, Mapping[str, int]] | None = None,
    group_bytes: Mapping[str, Sequence[int]] | None = None,
) -> tuple[Component, ...]:
    """Components with their weights and, for layerwise ones, each named layer's bytes; for
    those group offloading forms block groups on, each group's bytes."""
    layer_bytes, group_bytes = layer_bytes or {}, group_bytes or {}
    for what, given in (("layer", layer_bytes), ("group", group_bytes)):
        unknown = sorted(set(given) - set(component_weight_bytes))
        if unknown:
            raise PlanInputError(f"{what} bytes for unknown components {unknown}")
    out = []
    for name, weight in component_weight_bytes.items():
        layers = layer_bytes.get(name, {})
        groups = tuple(group_bytes.get(name, ()))
        out.append(Component(name, weight, tuple(layers.values()), tuple(layers), groups))
    return tuple(out)


def target_name(params: Point) -> str:
    """``steps=50,frames=81,...``: how a target shows in tables and JSON."""
    return point_text(params)


@frozen
class Measured:
    """One phase as calibrated: its bound, active components, stage, and weights at its peak."""

    label: str
    bound: int | None
    active: Sequence[str]
    stage: str | None
    weights: int | None = None  # None: the calibration's weights (everything on the device)
    kind: str | None = None  # the recorded phase's kind (``runtime.kinds.PhaseKind``)


def _target(
    name: str,
    phases: Sequence[Measured],
    layer_calls: Mapping[tuple[str, str], int],
    components: Sequence[Component],
    measured_weights_bytes: int | None,
    weight: int,
    compute: tuple[float | None, Mapping[str, float]] = (None, {}),
    unobserved: Sequence[str] = (),
    whole: Whole = (),
    streamed: bool = False,
) -> Target:
    known = {c.name for c in components}
    _check_known(unobserved, known)
    needs = _whole_by_stage(whole, phases, known)
    held = {c.name: 0 if streamed else max(c.layer_bytes) for c in components if c.layer_bytes}
    weights = (
        sum(c.weight_bytes for c in components)
        if measured_weights_bytes is None
        else measured_weights_bytes
    )
    planned: list[Phase] = []
    stages: dict[str, set[str]] = {}
    for p in phases:
        if p.bound is None:
            raise PlanInputError(f"phase {p.label!r} has no estimate: it cannot be planned for")
        members = tuple(dict.fromkeys([*(n for n in p.active if n in known), *unobserved]))
        on_device = weights if p.weights is None else p.weights
        if p.kind == PhaseKind.PREFETCH:  # onloading ahead: present, charged once, not a use
            planned.append(Phase(p.label, max(0, p.bound - on_device), (), prefetched=members))
            continue
        bound = max(0, p.bound - on_device)
        refresh = needs.get(p.stage or p.label, ())
        streams = [held[n] for n in members if n in held and n not in refresh]
        moves = bound + max(streams) if streams else None
        planned.append(Phase(p.label, bound, members, refresh, moves))
        for n in members:
            stages.setdefault(n, set()).add(p.stage or p.label)
    uses = {n: len(s) for n, s in stages.items()}
    recorded = {component for component, _ in layer_calls}
    layer_uses = {  # a component whose layers were never counted: once per onload (the solver's)
        c.name: tuple(layer_calls.get((c.name, layer), 0) for layer in c.layer_names)
        for c in components
        if c.layer_names and c.name in recorded
    }
    return Target(name, tuple(planned), uses, layer_uses, weight, compute[0], compute[1])


def _whole_by_stage(
    whole: Whole, phases: Sequence[Measured], known: set[str]
) -> dict[str, tuple[str, ...]]:
    """Each stage's components needed whole; a stage or component not calibrated refused."""
    stages = {p.stage or p.label for p in phases if p.kind != PhaseKind.PREFETCH}
    out: dict[str, tuple[str, ...]] = {}
    for stage, component in whole:
        if stage not in stages:
            raise UnknownWholeError(
                f"--whole {stage}={component}: no stage {stage!r}; the calibration has "
                f"{', '.join(sorted(stages))}"
            )
        if component not in known:
            raise UnknownWholeError(
                f"--whole {stage}={component}: no component {component!r}; the calibration has "
                f"{', '.join(sorted(known))}"
            )
        out[stage] = (*out.get(stage, ()), component)
    return out


def _check_known(unobserved: Sequence[str], known: set[str]) -> None:
    unknown = [n for n in unobserved if n not in known]
    if unknown:
        raise PlanInputError(
            f"unobserved_components: unknown component {unknown[0]!r} (component_weight_bytes "
            f"has {', '.join(sorted(known))})"
        )


def from_estimate(
    estimate: WorkloadEstimate,
    components: Sequence[Component],
    *,
    measured_weights_bytes: int | None = None,
    weight: int = 1,
    phase_weights: Mapping[str, int] | None = None,
    unobserved: Sequence[str] = (),
    whole: Whole = (),
    streamed: bool = False,
) -> Target:
    """A ``Target`` from a ``runtime.estimate.WorkloadEstimate`` (bounds with the margin), each
    phase's weights at its peak by label (``Calibration.phase_weights``), the components no
    phase saw (``Calibration.unobserved``), the full-weight needs (``whole``) and whether it
    was measured streaming block by block (``streamed``: its peaks are the arrivals).

    An offloaded component is onloaded once per stage it is active in; each layer's calls are the
    estimate's ``layer_calls()`` summed over stages.
    """
    weights = phase_weights or {}
    missing = next((p for p in estimate.phases if p.peak.bound_bytes is None), None)
    if missing is not None:  # the estimator's reason says why (a probe that failed, too few sizes)
        raise PlanInputError(
            f"phase {missing.label!r} has no estimate ({missing.peak.reason}): it cannot be "
            "planned for"
        )
    phases = [
        Measured(
            p.label,
            p.peak.bound_bytes,
            p.active_components,
            p.stage,
            weights.get(p.label),
            p.kind,
        )
        for p in estimate.phases
    ]
    return _target(
        target_name(estimate.target),
        phases,
        estimate.layer_calls(),
        components,
        measured_weights_bytes,
        weight,
        (
            estimate.timing.seconds,
            {s.stage: s.seconds for s in estimate.timing.stages if s.seconds is not None},
        ),
        unobserved,
        whole,
        streamed,
    )


class CalibrationLike(Protocol):
    """What ``from_calibration`` reads of a ``calibration.calibrate.run.Calibration``."""

    @property
    def estimate(self) -> WorkloadEstimate: ...
    @property
    def component_weight_bytes(self) -> Mapping[str, int]: ...
    @property
    def layer_bytes(self) -> Mapping[str, Mapping[str, int]]: ...
    @property
    def group_bytes(self) -> Mapping[str, Sequence[int]]: ...
    @property
    def phase_weights(self) -> Mapping[str, int]: ...
    @property
    def unobserved(self) -> tuple[str, ...]: ...
    @property
    def offload(self) -> str: ...


def from_calibration(cal: CalibrationLike, whole: Whole = ()) -> Calibrated:
    """The planner's input straight from a calibration in memory (``dslc plan`` without
    ``--calibration``, the lifecycle): the components, bounds, layer calls, compute and target
    its saved document gives, without building and reading one; ``whole``: full-weight needs."""
    components = components_from_bytes(cal.component_weight_bytes, cal.layer_bytes, cal.group_bytes)
    target = from_estimate(
        cal.estimate,
        components,
        phase_weights=cal.phase_weights,
        unobserved=cal.unobserved,
        whole=whole,
        streamed=cal.offload in STREAMED_UNDER,
    )
    return Calibrated(components, target)


def _compute(doc: Mapping[str, Json]) -> tuple[float | None, dict[str, float]]:
    """The request's predicted compute and each stage's, in seconds (the document has ms)."""
    request = doc.get("request") or {}
    total = request.get("predicted_ms")
    stages = {
        str(s["stage"]): s["predicted_ms"] / 1e3
        for s in _items(doc, "stages", [])
        if s.get("predicted_ms") is not None
    }
    return (None if total is None else total / 1e3), stages


def load_calibration(
    source: str | Path | Mapping[str, Json], *, weight: int = 1, whole: Whole = ()
) -> Calibrated:
    """Read a ``dslc calibrate --json`` / ``--save`` document (docs/planning.md lists the keys):
    strictly, checked against its schema and its own component names (``document_check``);
    ``whole``: full-weight needs (a stage or component it lacks: ``UnknownWholeError``)."""
    where = "" if isinstance(source, Mapping) else f" {path_text(source)}"
    try:
        doc = source if isinstance(source, Mapping) else read_document(source)
    except DocumentError as exc:  # its message names the file already
        raise CalibrationFormatError(f"calibration document {exc}") from None
    try:
        check_document(doc)
    except DocumentError as exc:
        raise CalibrationFormatError(f"calibration document{where}: {exc}") from None
    try:
        return _parse(doc, weight, whole)
    except UnknownWholeError:  # an option's mistake, not the document's
        raise
    except PlanInputError as exc:
        raise CalibrationFormatError(f"calibration document{where}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CalibrationFormatError(
            f"calibration document{where}: {type(exc).__name__}: {exc}"
        ) from None


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise PlanInputError(f"{what} must be an int >= 0, got {value!r}")
    return value


def _items(doc: Mapping[str, Json], key: str, default: Json = None) -> Json:
    value = doc.get(key, default)
    if value is None:
        raise PlanInputError(f"missing key {key!r}")
    if len(value) > MAX_ITEMS:
        raise PlanInputError(f"{key!r} has {len(value)} items; at most {MAX_ITEMS}")
    return value


def _parse(doc: Mapping[str, Json], weight: int, whole: Whole = ()) -> Calibrated:
    weights = {
        str(k): _int(v, f"component_weight_bytes[{k!r}]")
        for k, v in _items(doc, "component_weight_bytes").items()
    }
    layers: dict[str, dict[str, int]] = {}
    for c, per in _items(doc, "layer_bytes", {}).items():
        if len(per) > MAX_ITEMS:
            raise PlanInputError(f"layer_bytes[{c!r}] has {len(per)} layers; at most {MAX_ITEMS}")
        layers[str(c)] = {str(n): _int(b, f"layer_bytes[{c!r}][{n!r}]") for n, b in per.items()}
    components = components_from_bytes(weights, layers, group_sizes(doc))
    phases = [
        Measured(
            str(p["label"]),
            None if p.get("bound_peak_bytes") is None else _int(p["bound_peak_bytes"], "bound"),
            tuple(str(n) for n in p.get("active_components", ())),
            None if p.get("stage") is None else str(p["stage"]),
            None if p.get("weights_bytes") is None else _int(p["weights_bytes"], "weights_bytes"),
            None if p.get("kind") is None else str(p["kind"]),
        )
        for p in _items(doc, "phases")
    ]
    calls: dict[tuple[str, str], int] = {}
    for use in _items(doc, "layer_uses", []):
        key = (str(use["component"]), str(use["layer"]))
        calls[key] = calls.get(key, 0) + _int(use["calls"], "layer_uses[].calls")
    measured = doc.get("measured_weights_bytes")
    target = doc.get("target") or {}
    name = target_name(target) if isinstance(target, Mapping) else str(target)
    return Calibrated(
        components,
        _target(
            name,
            phases,
            calls,
            components,
            None if measured is None else _int(measured, "measured_weights_bytes"),
            weight,
            _compute(doc),
            tuple(str(n) for n in _items(doc, "unobserved_components", [])),
            whole,
            _streamed(doc),
        ),
    )


def group_sizes(doc: Mapping[str, Json]) -> dict[str, tuple[int, ...]]:
    """Each component's block groups (``group_bytes``), counted before they are read; none in
    a document written before them. A bad one is a ``PlanInputError``."""
    out = {}
    for c, sizes in _items(doc, "group_bytes", {}).items():
        if len(sizes) > MAX_ITEMS:
            raise PlanInputError(f"group_bytes[{c!r}] has {len(sizes)} groups; at most {MAX_ITEMS}")
        out[str(c)] = tuple(_int(b, f"group_bytes[{c!r}][{i}]") for i, b in enumerate(sizes))
    return out


def _streamed(doc: Mapping[str, Json]) -> bool:
    """Whether the document was calibrated streaming block by block (``calibrated_under``)."""
    under = doc.get("calibrated_under")
    return isinstance(under, Mapping) and under.get("offload") in STREAMED_UNDER
