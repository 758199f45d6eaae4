"""Tiny modules the example factories share: one 8x AutoencoderKL builder, seeded alike."""

from __future__ import annotations

from typing import Any

#: A 4-level (8x) AutoencoderKL with 16 channels a level: enough that its working set, not the
#: decoded image, sets the decoding peak, as in a real VAE.
TINY_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [16, 16, 16, 16],
    "layers_per_block": 1,
    "latent_channels": 4,
    "norm_num_groups": 4,
}


def tiny_vae(seed: int, **overrides: Any) -> Any:
    """``diffusers.AutoencoderKL(**TINY_VAE, **overrides)``, its weights drawn from ``seed``."""
    import torch
    from diffusers import AutoencoderKL

    torch.manual_seed(seed)
    return AutoencoderKL(**{**TINY_VAE, **overrides})
