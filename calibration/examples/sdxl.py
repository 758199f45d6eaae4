"""A tiny diffusers ``StableDiffusionXLPipeline`` (UNet), random weights, built offline.

The shape follows SDXL base where it matters for how memory and time scale: a 3-level UNet whose
first level has no attention (DownBlock2D, then two CrossAttnDownBlock2D, as in SDXL), two CLIP text
encoders (the second with a projection, feeding the ``text_time`` added embedding), a 4-level
(8x) VAE, and the Euler discrete scheduler of the SDXL base checkpoint. Formulas:
``formulas/sdxl.wf``. Imports diffusers and transformers lazily (only when called).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from calibration.examples.tiny import quiet_pipeline, tiny_tokenizer, tiny_vae

if TYPE_CHECKING:
    from diffusers.pipelines.pipeline_utils import DiffusionPipeline
    from transformers import CLIPTextConfig, PreTrainedTokenizerFast

#: Formula params of a bounded warmup, the probe and a demo target (>= 4x the probe's work).
WARMUP: dict[str, int | bool] = {"steps": 2, "height": 64, "width": 64}
PROBE: dict[str, int | bool] = {"steps": 2, "height": 128, "width": 128}
TARGET: dict[str, int | bool] = {"steps": 8, "height": 256, "width": 256}

_WORDS = ("<pad>", "</s>", "<unk>", "a", "cat", "dance", "photo", "of", "the", "astronaut", "horse")
_TEXT_TOKENS = 16  # both tokenizers pad to this (CLIP position tables have 16 entries)
_CLIP_DIM = 32  # hidden size of each CLIP encoder; the UNet's cross-attention sees both: 64
_TIME_EMBED = 8  # addition_time_embed_dim (SDXL: 256)


def tiny_clip_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level fast tokenizer built in memory, padded to the CLIP encoders' position table."""
    return tiny_tokenizer(_WORDS, model_max_length=_TEXT_TOKENS)


def _clip_config() -> CLIPTextConfig:
    from transformers import CLIPTextConfig

    return CLIPTextConfig(
        vocab_size=len(_WORDS),
        hidden_size=_CLIP_DIM,
        intermediate_size=37,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=_TEXT_TOKENS,
        projection_dim=_CLIP_DIM,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=0,
    )


def build(seed: int = 0) -> DiffusionPipeline:
    """A ``diffusers.StableDiffusionXLPipeline`` on the CPU, random weights, progress bar off."""
    import torch
    from diffusers import (
        EulerDiscreteScheduler,
        StableDiffusionXLPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        sample_size=128,  # SDXL base: 128 latents = 1024 pixels
        in_channels=4,
        out_channels=4,
        block_out_channels=(16, 32, 64),
        layers_per_block=2,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        transformer_layers_per_block=(1, 1, 2),
        attention_head_dim=(2, 4, 8),
        use_linear_projection=True,
        cross_attention_dim=2 * _CLIP_DIM,
        addition_embed_type="text_time",
        addition_time_embed_dim=_TIME_EMBED,
        projection_class_embeddings_input_dim=6 * _TIME_EMBED + _CLIP_DIM,
        norm_num_groups=8,
    )
    vae = tiny_vae(seed, sample_size=1024, scaling_factor=0.13025)
    torch.manual_seed(seed)
    text_encoder = CLIPTextModel(_clip_config())
    torch.manual_seed(seed)
    text_encoder_2 = CLIPTextModelWithProjection(_clip_config())
    scheduler = EulerDiscreteScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        steps_offset=1,
        timestep_spacing="leading",
    )
    pipe = StableDiffusionXLPipeline(
        vae=vae,
        text_encoder=text_encoder,
        text_encoder_2=text_encoder_2,
        tokenizer=tiny_clip_tokenizer(),
        tokenizer_2=tiny_clip_tokenizer(),
        unet=unet,
        scheduler=scheduler,
        add_watermarker=False,
    )
    return quiet_pipeline(pipe)


def call_kwargs(seed: int) -> dict[str, object]:
    """Constant ``pipe(...)`` arguments (the formula params come on top)."""
    import torch

    return {
        "prompt": "a photo of an astronaut",
        "guidance_scale": 5.0,
        "output_type": "pt",
        "generator": torch.Generator().manual_seed(seed),
    }
