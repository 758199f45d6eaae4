"""FLUX.1 text-to-image (diffusers ``FluxPipeline``), tiny, random weights: formulas/flux.wf."""

from __future__ import annotations

from typing import TYPE_CHECKING

from calibration.examples.tiny import (
    TINY_WORDS,
    quiet_pipeline,
    tiny_t5_config,
    tiny_tokenizer,
    tiny_vae,
)

if TYPE_CHECKING:
    from diffusers import FluxTransformer2DModel
    from diffusers.pipelines.pipeline_utils import DiffusionPipeline
    from transformers import CLIPTextModel, PreTrainedTokenizerFast, T5EncoderModel

_TEXT_TOKENS = 16  # CLIP pads to this (its position table has 16 entries)


def build(seed: int = 0) -> DiffusionPipeline:
    """A ``diffusers.FluxPipeline``: tiny CLIP and T5 encoders, a 4-level VAE (8x) and a 2-block
    transformer.
    """
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline

    vae = tiny_vae(
        seed,
        block_out_channels=[8, 8, 8, 8],
        latent_channels=16,
        use_quant_conv=False,
        use_post_quant_conv=False,
        shift_factor=0.0609,
        scaling_factor=1.5035,
    )
    transformer = _transformer(seed)
    clip, t5 = _text_encoders(seed)
    pipe = FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=clip,
        tokenizer=_clip_tokenizer(),
        text_encoder_2=t5,
        tokenizer_2=tiny_tokenizer(),
        transformer=transformer,
    )
    return quiet_pipeline(pipe)


def _transformer(seed: int) -> FluxTransformer2DModel:
    """One double-stream and one single-stream block, guidance-distilled like FLUX.1-dev."""
    import torch
    from diffusers import FluxTransformer2DModel

    torch.manual_seed(seed)
    return FluxTransformer2DModel(
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


def _text_encoders(seed: int) -> tuple[CLIPTextModel, T5EncoderModel]:
    """The CLIP (pooled) and T5 (sequence) encoders, drawn one after the other from ``seed``."""
    import torch
    from transformers import CLIPTextConfig, CLIPTextModel, T5EncoderModel

    torch.manual_seed(seed)
    clip = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(TINY_WORDS),
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=1,
            num_attention_heads=4,
            max_position_embeddings=_TEXT_TOKENS,
            projection_dim=32,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
    )
    return clip, T5EncoderModel(tiny_t5_config())


def _clip_tokenizer() -> PreTrainedTokenizerFast:
    """``tiny_tokenizer`` padding to the CLIP position table."""
    tokenizer = tiny_tokenizer()
    tokenizer.model_max_length = _TEXT_TOKENS
    return tokenizer


def call_kwargs(seed: int) -> dict[str, object]:
    import torch

    return {
        "prompt": "a cat dance",
        # true CFG runs only with a negative prompt and true_cfg_scale > 1 (the formulas' cfg);
        # at true_cfg_scale 1 it is never encoded
        "negative_prompt": "blurry",
        "guidance_scale": 3.5,
        "max_sequence_length": 16,
        "output_type": "pt",
        "generator": torch.Generator().manual_seed(seed),
    }


WARMUP = {"steps": 2, "height": 64, "width": 64}
PROBE = {"steps": 2, "height": 96, "width": 96}
TARGET = {"steps": 8, "height": 128, "width": 128}
