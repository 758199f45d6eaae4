"""A saved plan read back: the ``dslc plan --json`` document as the placement a calibration runs
under (``--calibrate-offload plan:FILE``; docs/measurement.md, "Calibrating under offload").

The file is untrusted. It is read as a saved calibration is (``document_check``: a regular file,
at most ``MAX_DOCUMENT_BYTES``, strict JSON: no repeated key, no NaN), checked against
``calibration/schema/plan.schema.json`` (types, bounds, the placements' spellings), then against
itself (each component once, layer indices within its layers, a feasible plan), and against the
pipeline when it is applied (``check_pipeline``: every component of the pipeline, no other, the
same layer counts). Every refusal is a ``PlanFileError`` naming the file, the place in it and the
fix. What ``calibration.plan.apply`` uses is read: the placements (each field the document has),
the device and the totals; the phases and times the plan predicted are not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from pathlib import Path
from typing import Any, NoReturn

from attrs import Factory, define, frozen

from artifact.limits import (
    MAX_PLAN_CANDIDATES,
    MAX_PLAN_COMPONENTS,
    MAX_PLAN_LAYERS,
    MAX_PLAN_PHASES,
)
from artifact.spelling import file_value, path_text
from calibration.plan.document_check import (
    SCHEMA,
    DocumentError,
    ObjectCount,
    first_violation,
    read_document,
)
from calibration.plan.model import Device, Placement, PlacementKind, Plan, PlanInputError
from calibration.plan.report import placement_text

PLAN_SCHEMA = SCHEMA.parent / "plan.schema.json"
#: What every refusal ends with: where a good file comes from.
FIX = "--calibrate-offload plan:FILE reads what `dslc plan --json` writes (docs/planning.md)"
_SHOWN = 8  # component names a message lists
#: JSON objects a plan document may hold: its phases (MAX_PLAN_PHASES at most), its times (two
#: objects a target), components and device come to under 75,000; twice the phases bounds them.
MAX_PLAN_OBJECTS = 2 * MAX_PLAN_PHASES
_PLAN_HOLDS = (
    f"a plan document holds one a phase (at most {MAX_PLAN_PHASES:,}: MAX_PLAN_PHASES) and a few "
    "more"
)


class PlanFileError(PlanInputError):
    """A saved plan refused: the message names the file, the place in it and what to give."""


@frozen
class SavedPlan:
    """A plan read from a file: the placement to calibrate under, and the file it came from."""

    path: str
    plan: Plan

    def __str__(self) -> str:  # on one line in every message, whatever the path holds
        return f"plan:{path_text(self.path)}"

    def placement(self) -> dict[str, str]:
        """Each component's placement as `dslc plan` prints it (``layerwise 1/2``)."""
        return {
            p.component: placement_text(p.kind, len(p.resident_layers), p.layers)
            for p in self.plan.placements
        }


def read_plan(path: str | Path) -> SavedPlan:
    """The plan in ``path`` (a ``dslc plan --json`` document), checked; ``PlanFileError``."""
    try:
        doc = read_document(path, "a plan document", _LayerCount())
    except DocumentError as exc:  # its message names the file already
        raise PlanFileError(f"plan file {exc}; {FIX}") from None
    try:
        _check(doc)
        return SavedPlan(str(path), _plan(doc))
    except (DocumentError, PlanInputError) as exc:
        raise PlanFileError(f"plan file {path_text(path)}: {exc}; {FIX}") from None
    except (TypeError, ValueError) as exc:  # a value attrs refuses that the schema let through
        raise PlanFileError(
            f"plan file {path_text(path)}: {type(exc).__name__}: {exc}; {FIX}"
        ) from None


def _check(doc: Mapping[str, Any]) -> None:
    """The schema, then what it cannot say: a feasible plan, each component once, its layers."""
    if "ranks" in doc and "components" not in doc:
        raise DocumentError(
            "a document of several ranks' plans (`dslc plan` with several --device-memory); "
            "save the one rank's plan to calibrate under (its `ranks[N]`)"
        )
    _check_counts(doc)
    first_violation(doc, PLAN_SCHEMA, "a `dslc plan --json` document")
    if not doc["feasible"]:
        raise DocumentError(
            f"feasible: false: the plan places nothing ({file_value(doc['reason'])}); plan for a "
            "larger --device-memory, or calibrate under --calibrate-offload model or group"
        )
    seen: dict[str, int] = {}
    for i, c in enumerate(doc["components"]):
        if c["name"] in seen:
            raise DocumentError(
                f"components[{i}].name: {file_value(c['name'])} again (components"
                f"[{seen[c['name']]}]); each component is placed once"
            )
        seen[c["name"]] = i
        _check_layers(c, f"components[{i}]")


def _check_counts(doc: Mapping[str, Any]) -> None:
    """The components counted before the schema walks them (a walk of 100,000 takes seconds, a
    count no time; ``_LayerCount`` counted their layer indices as they were parsed)."""
    components = doc.get("components")
    if isinstance(components, list) and len(components) > MAX_PLAN_COMPONENTS:
        raise DocumentError(  # more than the planner ever places
            f"components: {len(components):,}; a plan places at most "
            f"{MAX_PLAN_COMPONENTS} (MAX_PLAN_COMPONENTS)"
        )


@define
class _LayerCount:
    """The parser's hook, each object as it is finished: a component keeping more layers than a
    plan streams, or components listing more layer indices in all than the planner weighs
    placements (each index is a layer of its component: the layers of a plan sum to at most
    MAX_PLAN_CANDIDATES), or more objects than MAX_PLAN_OBJECTS, stop the parse there. So 80 x
    100,000 indices are never read, nor 256 components of 4,096 walked by the schema (about 9 us
    an index: 9 s), nor a million empty objects held (76 MiB)."""

    total: int = 0
    count: ObjectCount = Factory(lambda: ObjectCount(MAX_PLAN_OBJECTS, _PLAN_HOLDS))

    def __call__(self, obj: dict[str, object]) -> object:
        self.count(obj)
        for key, verb, noun, unit in (
            ("resident_layers", "keeps", "layer indices", "layers"),
            ("pinned_layers", "pins", "layer indices", "layers"),
            ("group_bytes", "moves", "group sizes", "block groups"),
        ):
            kept = obj.get(key)
            if not isinstance(kept, list):
                continue
            if len(kept) > MAX_PLAN_LAYERS:
                raise DocumentError(
                    f"{key} of the component {file_value(obj.get('name'))}: {len(kept):,} "
                    f"{noun}; a plan {verb} at most {MAX_PLAN_LAYERS:,} {unit} a "
                    "component (MAX_PLAN_LAYERS)"
                )
            self.total += len(kept)
            if self.total > MAX_PLAN_CANDIDATES:
                raise DocumentError(
                    f"{key} of the component {file_value(obj.get('name'))}: {self.total:,} "
                    f"{noun} in all so far; a plan's components have at most "
                    f"{MAX_PLAN_CANDIDATES:,} {unit} in all (MAX_PLAN_CANDIDATES)"
                )
        return obj


def _check_layers(c: Mapping[str, Any], place: str) -> None:
    """Layer indices within the layers, ascending; kept layers only for a layerwise placement."""
    kept, layers = c["resident_layers"], c["layers"]
    if layers > MAX_PLAN_LAYERS:  # more than the planner ever streams
        raise DocumentError(
            f"{place}.layers: {layers:,}; a plan streams at most {MAX_PLAN_LAYERS:,} layers a "
            "component (MAX_PLAN_LAYERS)"
        )
    if c["placement"] != PlacementKind.LAYERWISE and kept:
        raise DocumentError(
            f"{place}.resident_layers: {len(kept):,} layer(s) for a {c['placement']} component; "
            "only a layerwise one keeps some layers"
        )
    pinned = c.get("pinned_layers", [])
    if pinned and (c["placement"] != PlacementKind.LAYERWISE or set(pinned) & set(kept)):
        raise DocumentError(
            f"{place}.pinned_layers: only a layerwise component's streamed layers are pinned "
            "by range (none of its resident_layers)"
        )
    _check_groups(c["placement"], c.get("group_bytes", []), place)
    for key, indices in (("resident_layers", kept), ("pinned_layers", pinned)):
        for j, index in enumerate(indices):
            if index >= layers or (j and index <= indices[j - 1]):
                raise DocumentError(
                    f"{place}.{key}[{j}]: {index} is not a layer index after the one before "
                    f"it (the component has {layers} layers: 0 to {layers - 1}, ascending)"
                )


def _check_groups(kind: str, groups: Sized, place: str) -> None:
    """Block groups for a grouped placement, and only for one (their sizes are checked against
    the pipeline's own groups when it is applied: ``check_pipeline``)."""
    if kind == PlacementKind.GROUPED and not groups:
        raise DocumentError(
            f"{place}.group_bytes: a grouped component needs its block groups' bytes (what "
            "`dslc plan --json` writes for it)"
        )
    if kind != PlacementKind.GROUPED and groups:
        raise DocumentError(
            f"{place}.group_bytes: {len(groups):,} block group(s) for a {kind} "
            "component; only a grouped one is onloaded group by group"
        )


def _plan(doc: Mapping[str, Any]) -> Plan:
    """The checked document as a ``Plan``: its placements, device and totals (no phases)."""
    d = doc["device"]
    device = Device(
        capacity_bytes=d["capacity_bytes"],
        reserve_bytes=d.get("reserve_bytes"),
        pin_budget_bytes=d.get("pin_budget_bytes"),
        host_memory_bytes=d.get("host_memory_bytes"),
        **{k: float(d[k]) for k in ("bandwidth_bytes_per_s", "pageable_factor") if k in d},
    )
    placements = tuple(_placement(c) for c in doc["components"])
    return Plan(
        feasible=True,
        reason=doc["reason"],
        placements=placements,
        phases=(),
        transfer_bytes=doc.get("transfer_bytes", sum(p.transfer_bytes for p in placements)),
        transfer_s=float(doc.get("transfer_s", sum(p.transfer_s for p in placements))),
        device=device,
        pinned_bytes=doc.get("pinned_bytes", sum(p.pinned_bytes for p in placements)),
    )


def _placement(c: Mapping[str, Any]) -> Placement:
    """One component's placement, each field the document gives (absent: 0, or None)."""
    pageable = c.get("pageable_bytes", 0)
    return Placement(
        component=c["name"],
        kind=PlacementKind(c["placement"]),
        resident_layers=tuple(c["resident_layers"]),
        layers=c["layers"],
        device_bytes=c.get("device_bytes", 0),
        onload_bytes=c.get("onload_bytes", 0),
        pinned_bytes=c.get("pinned_bytes", 0),
        transfer_bytes=c.get("transfer_bytes", 0),
        transfer_s=float(c.get("transfer_s", 0.0)),
        binding_phase=c.get("binding_phase"),
        missing_bytes=c.get("missing_bytes", 0),
        pageable_bytes=pageable,
        pageable=pageable > 0,
        pinned_layers=tuple(c.get("pinned_layers", ())),
        group_bytes=tuple(c.get("group_bytes", ())),
    )


def check_pipeline(
    saved: SavedPlan,
    layers: Mapping[str, int],
    groups: Mapping[str, tuple[int, ...]] | None = None,
) -> None:
    """The plan places every component of the pipeline (``layers``: each one's repeated layers),
    no other, a layerwise one with those layers, a grouped one with the block groups the pipeline
    forms (``groups``: each grouped one's, by ``calibration.placement.groups.block_groups``;
    None: not checked) (``PlanFileError`` naming the file and place)."""
    has = _names(layers)
    placed = {p.component for p in saved.plan.placements}
    for i, p in enumerate(saved.plan.placements):
        if p.component not in layers:
            _refuse(
                saved,
                f"components[{i}].name: the pipeline has no component "
                f"{file_value(p.component)} (it has {has})",
            )
        count = layers[p.component]
        if p.kind == PlacementKind.LAYERWISE and count != p.layers:
            _refuse(
                saved,
                f"components[{i}].layers: {p.layers}, but the pipeline's "
                f"{p.component} has {count} repeated layers",
            )
        mine = None if groups is None else groups.get(p.component, ())
        if p.kind == PlacementKind.GROUPED and mine is not None and mine != p.group_bytes:
            _refuse(
                saved,
                f"components[{i}].group_bytes: {len(p.group_bytes)} block group(s) of "
                f"{sum(p.group_bytes):,} bytes, but the pipeline's {p.component} forms "
                f"{len(mine)} of {sum(mine):,} bytes",
            )
    missing = [n for n in layers if n not in placed]
    if missing:
        _refuse(saved, f"components: no placement for {_names(missing)} (the pipeline has {has})")


def _refuse(saved: SavedPlan, what: str) -> NoReturn:
    raise PlanFileError(
        f"plan file {path_text(saved.path)}: {what}: a plan of another pipeline; save one of this "
        "pipeline with `dslc plan ... --json` and calibrate under it"
    )


def _names(names: Mapping[str, object] | list[str]) -> str:
    shown = [file_value(n) for n in list(names)[:_SHOWN]]
    more = f" and {len(names) - _SHOWN:,} more" if len(names) > _SHOWN else ""
    return (", ".join(shown) or "none") + more
