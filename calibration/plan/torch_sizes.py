"""What the planner needs from torch modules: each component's weights and its layers' bytes.

Imports torch only through ``runtime.measure`` and ``calibration.session`` when called; the
layers are the recorder's own (``runtime.measure.layers.repeated_layers``), so their names match
the calibration's layer uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def layer_bytes(module: Any) -> dict[str, int]:
    """Bytes of each repeated layer (``transformer_blocks.0`` ...), in the module's order."""
    from calibration.session import weight_bytes
    from runtime.measure.layers import repeated_layers

    return {name: weight_bytes(layer) for name, layer in repeated_layers(module)}


def pipeline_bytes(
    pipe: Any, layerwise: tuple[str, ...] = ()
) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """``component_weight_bytes`` of every torch module of a diffusers pipeline, and
    ``layer_bytes`` of the ``layerwise`` ones (default: every component with repeated layers)."""
    import torch

    from calibration.session import weight_bytes

    modules: Mapping[str, Any] = {
        name: m for name, m in pipe.components.items() if isinstance(m, torch.nn.Module)
    }
    weights = {name: weight_bytes(m) for name, m in modules.items()}
    names = layerwise or tuple(modules)
    layers = {name: layer_bytes(modules[name]) for name in names if name in modules}
    return weights, {name: per for name, per in layers.items() if per}
