"""diffusers' ``StableDiffusion3Pipeline`` built tiny from random weights, a family no formula here
describes (issue 39 item 1 on unseen pipelines): two CLIP encoders with projection and a one-layer
T5 over the tiny tokenizer, a two-block MMDiT (patch 1, 128 wide: its blocks, 2.4 MB each,
outweigh the small sizes' activations, as a real model's do) and the tiny 8x VAE. CFG runs with
``guidance_scale > 1`` and the negative prompt given here."""

from __future__ import annotations

from calibration.examples.tiny import (
    TINY_WORDS,
    prompted,
    quiet_pipeline,
    tiny_t5_config,
    tiny_tokenizer,
    tiny_vae,
)

#: The CLIP encoders pad to this (their position tables hold as many entries).
CLIP_TOKENS = 16

#: The skeleton a user writes for it: params, `call` facts and the probe group, no stages.
SKELETON = """pipeline sd3 {
    param steps: int = 28 in [1, 1000]
    param height: int = 256 in [16, 256] where height % 16 == 0
    param width: int = 256 in [16, 256] where width % 16 == 0
    param cfg: bool = true

    call num_inference_steps = steps
    call height = height
    call width = width
    call guidance_scale = if cfg then 7 else 1
    probe height, width
}
"""


def _clip(seed: int) -> object:
    """A one-layer CLIP text encoder with a 16-wide projection, drawn from ``seed``."""
    import torch
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    torch.manual_seed(seed)
    return CLIPTextModelWithProjection(
        CLIPTextConfig(
            vocab_size=len(TINY_WORDS),
            hidden_size=16,
            intermediate_size=37,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=CLIP_TOKENS,
            projection_dim=16,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
    )


def build(seed: int = 0) -> object:
    """A ``diffusers.StableDiffusion3Pipeline``, tiny, its weights drawn from ``seed``."""
    import torch
    from diffusers import (
        FlowMatchEulerDiscreteScheduler,
        SD3Transformer2DModel,
        StableDiffusion3Pipeline,
    )
    from transformers import T5EncoderModel

    vae = tiny_vae(seed, shift_factor=0.0609, scaling_factor=1.5035)
    torch.manual_seed(seed)
    transformer = SD3Transformer2DModel(
        sample_size=32,
        patch_size=1,
        in_channels=4,
        num_layers=2,
        attention_head_dim=32,
        num_attention_heads=4,
        joint_attention_dim=32,
        caption_projection_dim=128,
        pooled_projection_dim=32,
        out_channels=4,
        pos_embed_max_size=32,
    )
    torch.manual_seed(seed + 1)
    t5 = T5EncoderModel(tiny_t5_config())
    pipe = StableDiffusion3Pipeline(
        transformer=transformer,
        scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
        vae=vae,
        text_encoder=_clip(seed + 2),
        tokenizer=tiny_tokenizer(model_max_length=CLIP_TOKENS),
        text_encoder_2=_clip(seed + 3),
        tokenizer_2=tiny_tokenizer(model_max_length=CLIP_TOKENS),
        text_encoder_3=t5,
        tokenizer_3=tiny_tokenizer(),
    )
    return quiet_pipeline(pipe)


def call_kwargs(seed: int) -> dict[str, object]:
    """The prompt and a negative prompt (CFG), short text, tensor output."""
    return prompted(seed)
