"""Wan 2.1 text-to-video (diffusers ``WanPipeline``), tiny, random weights: formulas/wan.wf.

Default shapes keep the frame count of the target and shrink the area, so the Wan VAE's two memory
terms (a chunk's working set ~ height x width, the accumulated output ~ frames x height x width)
move together and the warmup and probe determine them at the target (docs/estimators.md).
"""

from __future__ import annotations

from typing import Any


def build(seed: int = 0) -> Any:
    """A ``diffusers.WanPipeline`` from tiny configs (calibration.examples.tiny_wan)."""
    from calibration.examples.tiny_wan import build_tiny_wan

    return build_tiny_wan(seed=seed)


def call_kwargs(seed: int) -> dict[str, Any]:
    """The prompt, a negative prompt (CFG), short text, tensor output; params come from `call`."""
    import torch

    from calibration.examples.tiny_wan import TINY_WAN_CALL

    return {**TINY_WAN_CALL, "generator": torch.Generator().manual_seed(seed)}


WARMUP = {"steps": 2, "frames": 17, "height": 32, "width": 32}
PROBE = {"steps": 2, "frames": 17, "height": 48, "width": 48}
TARGET = {"steps": 8, "frames": 17, "height": 64, "width": 64}
