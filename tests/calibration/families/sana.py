"""diffusers' ``SanaPipeline`` built tiny from random weights, a family no formula here describes
(issue 39 item 1 on unseen pipelines): a one-layer Gemma 2 over the tiny tokenizer, a two-block
linear-attention Sana transformer (patch 2, 512 wide: its blocks outweigh the small sizes'
activations, as a real model's do) and a two-level deep-compression VAE (``AutoencoderDC``, 2x),
with the DPM-Solver scheduler. CFG runs with ``guidance_scale > 1`` and the negative prompt given
here; resolution binning and the long instruction prefix are off (the tiny sizes have no bins)."""

from __future__ import annotations

from calibration.examples.tiny import TINY_WORDS, prompted, quiet_pipeline, tiny_tokenizer

#: The skeleton a user writes for it: params, `call` facts and the probe group, no stages.
SKELETON = """pipeline sana {
    param steps: int = 20 in [1, 1000]
    param height: int = 128 in [32, 256] where height % 32 == 0
    param width: int = 128 in [32, 256] where width % 32 == 0
    param cfg: bool = true

    call num_inference_steps = steps
    call height = height
    call width = width
    call guidance_scale = if cfg then 4.5 else 1
    probe height, width
}
"""


def build(seed: int = 0) -> object:
    """A ``diffusers.SanaPipeline``, tiny, its weights drawn from ``seed``."""
    import torch
    from diffusers import (
        AutoencoderDC,
        DPMSolverMultistepScheduler,
        SanaPipeline,
        SanaTransformer2DModel,
    )
    from transformers import Gemma2Config, Gemma2Model

    torch.manual_seed(seed)
    transformer = SanaTransformer2DModel(
        patch_size=2,
        in_channels=4,
        out_channels=4,
        num_layers=2,
        num_attention_heads=8,
        attention_head_dim=64,
        num_cross_attention_heads=8,
        cross_attention_head_dim=64,
        cross_attention_dim=512,
        caption_channels=8,
        sample_size=32,
    )
    vae = AutoencoderDC(
        in_channels=3,
        latent_channels=4,
        attention_head_dim=2,
        encoder_block_types=("ResBlock", "EfficientViTBlock"),
        decoder_block_types=("ResBlock", "EfficientViTBlock"),
        encoder_block_out_channels=(8, 8),
        decoder_block_out_channels=(8, 8),
        encoder_qkv_multiscales=((), (5,)),
        decoder_qkv_multiscales=((), (5,)),
        encoder_layers_per_block=(1, 1),
        decoder_layers_per_block=(1, 1),
        downsample_block_type="conv",
        upsample_block_type="interpolate",
        decoder_norm_types="rms_norm",
        decoder_act_fns="silu",
        scaling_factor=0.41407,
    )
    torch.manual_seed(seed + 1)
    encoder = Gemma2Model(
        Gemma2Config(
            head_dim=16,
            hidden_size=8,
            intermediate_size=64,
            max_position_embeddings=512,
            num_attention_heads=2,
            num_hidden_layers=1,
            num_key_value_heads=2,
            vocab_size=len(TINY_WORDS),
            pad_token_id=0,
            eos_token_id=1,
            bos_token_id=0,
        )
    )
    pipe = SanaPipeline(
        tokenizer=tiny_tokenizer(),
        text_encoder=encoder,
        vae=vae,
        transformer=transformer,
        scheduler=DPMSolverMultistepScheduler(),
    )
    return quiet_pipeline(pipe)


def call_kwargs(seed: int) -> dict[str, object]:
    """The prompt and a negative prompt (CFG), short text, tensor output, no binning."""
    return prompted(seed, use_resolution_binning=False, complex_human_instruction=None)
