"""A tiny diffusers ``CogVideoXPipeline`` (video DiT), random weights, built offline.

Shaped like CogVideoX-2b where it matters for scaling: a T5 encoder padded to a fixed length, a
``CogVideoXTransformer3DModel`` with 2x2 patches and 3D sin-cos position embeddings (recomputed for
any shape other than the config's sample size, as for every request of the real model but its
default), a 4-level causal 3D VAE (8x spatial, 4x temporal) that decodes two latent frames at a
time, and the ``CogVideoXDDIMScheduler`` of the 2b checkpoint. Formulas: ``formulas/cogvideox.wf``.
Imports diffusers and transformers lazily (only when called).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from calibration.examples.tiny import quiet_pipeline, tiny_t5_config, tiny_tokenizer

if TYPE_CHECKING:
    from diffusers import (
        AutoencoderKLCogVideoX,
        CogVideoXDDIMScheduler,
        CogVideoXTransformer3DModel,
    )
    from diffusers.pipelines.pipeline_utils import DiffusionPipeline

#: Formula params of a bounded warmup, the probe and a demo target (>= 4x the probe's work).
#: Frames 17 (5 latent frames) is the smallest count in the VAE's steady regime
#: (formulas/cogvideox.wf).
#: The warmup and the probe differ in frames and area, so the decoder's two memory terms (working
#: set ~ area, growth ~ frames x area) can be told apart (a third size from the two, see
#: docs/estimators.md).
WARMUP: dict[str, int | bool] = {"steps": 2, "frames": 17, "height": 32, "width": 32}
PROBE: dict[str, int | bool] = {"steps": 2, "frames": 25, "height": 48, "width": 48}
TARGET: dict[str, int | bool] = {"steps": 4, "frames": 33, "height": 64, "width": 64}

_TEXT_TOKENS = 16  # max_sequence_length of the call and the transformer's max_text_seq_length


def build(seed: int = 0) -> DiffusionPipeline:
    """A ``diffusers.CogVideoXPipeline`` on the CPU, random weights, progress bar off."""
    import torch
    from diffusers import CogVideoXPipeline
    from transformers import T5EncoderModel

    vae = _vae(seed)
    transformer = _transformer(seed)
    torch.manual_seed(seed)
    text_encoder = T5EncoderModel(tiny_t5_config())
    pipe = CogVideoXPipeline(
        tokenizer=tiny_tokenizer(),
        text_encoder=text_encoder,
        vae=vae,
        transformer=transformer,
        scheduler=_scheduler(),
    )
    return quiet_pipeline(pipe)


def _vae(seed: int) -> AutoencoderKLCogVideoX:
    """A 4-level causal 3D VAE: 8x spatial, 4x temporal compression."""
    import torch
    from diffusers import AutoencoderKLCogVideoX

    torch.manual_seed(seed)
    # 32 channels: like the real VAE (128 at full resolution), the decoder's working set for one
    # batch of latent frames outweighs the 3-channel video it accumulates.
    return AutoencoderKLCogVideoX(
        in_channels=3,
        out_channels=3,
        down_block_types=("CogVideoXDownBlock3D",) * 4,
        up_block_types=("CogVideoXUpBlock3D",) * 4,
        block_out_channels=(32, 32, 32, 32),
        latent_channels=16,
        layers_per_block=1,
        norm_num_groups=4,
        temporal_compression_ratio=4,
    )


def _transformer(seed: int) -> CogVideoXTransformer3DModel:
    """Two blocks with 2x2 patches and CogVideoX-2b's sample size (its position embedding)."""
    import torch
    from diffusers import CogVideoXTransformer3DModel

    torch.manual_seed(seed)
    return CogVideoXTransformer3DModel(
        num_attention_heads=2,
        attention_head_dim=16,
        in_channels=16,
        out_channels=16,
        time_embed_dim=16,
        text_embed_dim=32,
        num_layers=2,
        sample_width=90,  # CogVideoX-2b: 720 / 8
        sample_height=60,  # 480 / 8
        sample_frames=49,
        patch_size=2,
        temporal_compression_ratio=4,
        max_text_seq_length=_TEXT_TOKENS,
    )


def _scheduler() -> CogVideoXDDIMScheduler:
    """The DDIM scheduler of the CogVideoX-2b checkpoint (v-prediction, zero terminal SNR)."""
    from diffusers import CogVideoXDDIMScheduler

    return CogVideoXDDIMScheduler(
        beta_schedule="scaled_linear",
        beta_start=0.00085,
        beta_end=0.012,
        clip_sample=False,
        prediction_type="v_prediction",
        rescale_betas_zero_snr=True,
        set_alpha_to_one=True,
        snr_shift_scale=3.0,
        steps_offset=0,
        timestep_spacing="trailing",
    )


def call_kwargs(seed: int) -> dict[str, object]:
    """Constant ``pipe(...)`` arguments (the formula params come on top)."""
    import torch

    return {
        "prompt": "a cat dance",
        "negative_prompt": "negative",
        "guidance_scale": 6.0,
        "max_sequence_length": _TEXT_TOKENS,
        "output_type": "pt",
        "generator": torch.Generator().manual_seed(seed),
    }
