"""diffusers' ``LTXPipeline`` (LTX-Video) built tiny from random weights, a family no formula here
describes (issue 39 item 1 on unseen pipelines): a one-layer T5 over the tiny tokenizer, a two-block
LTX transformer (patch 1, 512 wide: its blocks outweigh the small sizes' activations, as a real
model's do) and the LTX video VAE (4x temporal, 4x spatial here), its blocks inside an encoder and
a decoder. CFG runs with ``guidance_scale > 1`` and the negative prompt given here."""

from __future__ import annotations

from calibration.examples.tiny import prompted, quiet_pipeline, tiny_t5_config, tiny_tokenizer

#: The skeleton a user writes for it: params, `call` facts and the probe group, no stages.
SKELETON = """pipeline ltx {
    param steps: int = 50 in [1, 1000]
    param frames: int = 9 in [1, 65] where (frames - 1) % 4 == 0
    param height: int = 64 in [32, 256] where height % 32 == 0
    param width: int = 64 in [32, 256] where width % 32 == 0
    param cfg: bool = true

    call num_inference_steps = steps
    call num_frames = frames
    call height = height
    call width = width
    call guidance_scale = if cfg then 3 else 1
    probe frames, height, width
}
"""


def build(seed: int = 0) -> object:
    """A ``diffusers.LTXPipeline``, tiny, its weights drawn from ``seed``."""
    import torch
    from diffusers import (
        AutoencoderKLLTXVideo,
        FlowMatchEulerDiscreteScheduler,
        LTXPipeline,
        LTXVideoTransformer3DModel,
    )
    from transformers import T5EncoderModel

    torch.manual_seed(seed)
    vae = AutoencoderKLLTXVideo(
        in_channels=3,
        out_channels=3,
        latent_channels=8,
        block_out_channels=(8, 8, 8, 8),
        decoder_block_out_channels=(8, 8, 8, 8),
        layers_per_block=(1, 1, 1, 1, 1),
        decoder_layers_per_block=(1, 1, 1, 1, 1),
        spatio_temporal_scaling=(True, True, False, False),
        decoder_spatio_temporal_scaling=(True, True, False, False),
        decoder_inject_noise=(False, False, False, False, False),
        upsample_residual=(False, False, False, False),
        upsample_factor=(1, 1, 1, 1),
        timestep_conditioning=False,
        patch_size=1,
        patch_size_t=1,
        encoder_causal=True,
        decoder_causal=False,
    )
    transformer = LTXVideoTransformer3DModel(
        in_channels=8,
        out_channels=8,
        patch_size=1,
        patch_size_t=1,
        num_attention_heads=8,
        attention_head_dim=64,
        cross_attention_dim=512,
        num_layers=2,
        caption_channels=32,
    )
    torch.manual_seed(seed + 1)
    pipe = LTXPipeline(
        transformer=transformer,
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=T5EncoderModel(tiny_t5_config()),
        tokenizer=tiny_tokenizer(),
    )
    return quiet_pipeline(pipe)


def call_kwargs(seed: int) -> dict[str, object]:
    """The prompt and a negative prompt (CFG), short text, tensor output."""
    return prompted(seed)
