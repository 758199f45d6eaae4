"""FLUX.1 text-to-image (diffusers ``FluxPipeline``), tiny, random weights: formulas/flux.wf."""

from __future__ import annotations

from typing import Any

# --- FLUX.1 text-to-image -------------------------------------------------------------------------

_FLUX_WORDS = 11  # the vocabulary of calibration.examples.wan.tiny_tokenizer


def build(seed: int = 0) -> Any:
    """A ``diffusers.FluxPipeline``: tiny CLIP and T5 encoders, a 4-level VAE (8x) and a 2-block
    transformer.
    """
    import torch
    from diffusers import (
        AutoencoderKL,
        FlowMatchEulerDiscreteScheduler,
        FluxPipeline,
        FluxTransformer2DModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    from calibration.examples.wan import tiny_tokenizer

    torch.manual_seed(seed)
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 4,
        up_block_types=["UpDecoderBlock2D"] * 4,
        block_out_channels=[8, 8, 8, 8],
        layers_per_block=1,
        latent_channels=16,
        norm_num_groups=4,
        use_quant_conv=False,
        use_post_quant_conv=False,
        shift_factor=0.0609,
        scaling_factor=1.5035,
    )
    torch.manual_seed(seed)
    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=64,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        guidance_embeds=True,
        axes_dims_rope=(4, 6, 6),
    )
    torch.manual_seed(seed)
    clip = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=_FLUX_WORDS,
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=1,
            num_attention_heads=4,
            max_position_embeddings=16,
            projection_dim=32,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
    )
    t5 = T5EncoderModel(
        T5Config(
            vocab_size=_FLUX_WORDS,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=1,
            num_heads=4,
            relative_attention_num_buckets=8,
        )
    )
    tokenizer = tiny_tokenizer()
    tokenizer.model_max_length = 16  # CLIP pads to this (its position table has 16 entries)
    pipe = FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=clip,
        tokenizer=tokenizer,
        text_encoder_2=t5,
        tokenizer_2=tiny_tokenizer(),
        transformer=transformer,
    )
    pipe.set_progress_bar_config(disable=True)  # type: ignore[attr-defined]
    return pipe


def call_kwargs(seed: int) -> dict[str, Any]:
    import torch

    return {
        "prompt": "a cat dance",
        "guidance_scale": 3.5,
        "max_sequence_length": 16,
        "output_type": "pt",
        "generator": torch.Generator().manual_seed(seed),
    }


WARMUP = {"steps": 2, "height": 64, "width": 64}
PROBE = {"steps": 2, "height": 96, "width": 96}
TARGET = {"steps": 8, "height": 128, "width": 128}
