"""Weight sizing of torch modules, in one place: a module's bytes, its repeated layers' bytes.

The calibration (``Session.weights``) and the planner (``pipeline_bytes``) count alike: each storage
once, tied weights too. From the records: each phase's weights on the device (``phase_weights``)
and the components no phase saw (``unobserved``). The layers are the recorder's own
(``runtime.measure.layers``), so their names match the calibration's layer uses. Imports torch
only when called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

    from runtime.estimate import PhaseEstimate
    from runtime.measure.diffusers_hooks import DiffusersPipeline
    from runtime.record import WarmupRecord


def weight_bytes(module: nn.Module) -> int:
    """Bytes of a module's parameters and buffers, each storage counted once (tied weights too)."""
    storages = {}
    for t in (*module.parameters(), *module.buffers()):
        storage = t.untyped_storage()
        storages[storage.data_ptr(), storage.device] = storage.nbytes()
    return sum(storages.values())


def layer_bytes(module: nn.Module) -> dict[str, int]:
    """Bytes of each repeated layer (``transformer_blocks.0`` ...), in the module's order."""
    from runtime.measure.layers import repeated_layers

    return {name: weight_bytes(layer) for name, layer in repeated_layers(module)}


def module_weights(modules: Mapping[str, nn.Module]) -> dict[str, int]:
    """``weight_bytes`` of each module by name (a pipeline's ``component_weight_bytes``)."""
    return {name: weight_bytes(m) for name, m in modules.items()}


def module_layers(
    modules: Mapping[str, nn.Module], names: Iterable[str]
) -> dict[str, dict[str, int]]:
    """``layer_bytes`` of the named modules that have repeated layers (others are left out)."""
    layers = {name: layer_bytes(modules[name]) for name in names if name in modules}
    return {name: per for name, per in layers.items() if per}


def pipeline_bytes(
    pipe: DiffusersPipeline, layerwise: tuple[str, ...] = ()
) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """``component_weight_bytes`` of every torch module of a diffusers pipeline, and
    ``layer_bytes`` of the ``layerwise`` ones (default: every component with repeated layers)."""
    from runtime.measure.diffusers_hooks import pipeline_modules

    modules = pipeline_modules(pipe)
    return module_weights(modules), module_layers(modules, layerwise or tuple(modules))


def phase_weights(
    records: Iterable[WarmupRecord], phases: Iterable[PhaseEstimate]
) -> dict[str, int]:
    """Each estimated phase's weights on the device at its peak, by label: the fewest any
    successful record measured (the rest of the peak is activations, which the bound scales)."""
    fewest: dict[tuple[str, str, str | None], int] = {}
    for record in records:
        if not record.ok:
            continue
        for p in record.phases:
            if p.weights_bytes is not None:
                key = (p.kind, p.name, p.stage)
                fewest[key] = min(fewest.get(key, p.weights_bytes), p.weights_bytes)
    keys = {p.label: (p.kind, p.name, p.stage) for p in phases}
    return {label: fewest[key] for label, key in keys.items() if key in fewest}


def unobserved(records: Iterable[WarmupRecord], components: Iterable[str]) -> tuple[str, ...]:
    """The components no phase of any record saw active (no op read their weights in a phase)."""
    seen = {n for r in records for p in r.phases for n in p.used_components}
    return tuple(c for c in components if c not in seen)
