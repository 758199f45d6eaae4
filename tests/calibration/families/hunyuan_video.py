"""diffusers' ``HunyuanVideoPipeline`` built tiny from random weights, for
formulas/hunyuan_video.wf's ``hunyuan_video_t2v``: tiny Llama and CLIP encoders over the tiny
tokenizer, a transformer of one dual- and one single-stream block with the real 1x2x2 patch, and a
4-level video VAE (4x temporal, 8x spatial). True CFG runs with ``true_cfg_scale > 1`` (the
formula's cfg) and the negative prompt given here."""

from __future__ import annotations

from calibration.examples.tiny import TINY_WORDS, prompted, quiet_pipeline, tiny_tokenizer


def build(seed: int = 0) -> object:
    """A ``diffusers.HunyuanVideoPipeline``, tiny, its weights drawn from ``seed``."""
    import torch
    from diffusers import (
        AutoencoderKLHunyuanVideo,
        FlowMatchEulerDiscreteScheduler,
        HunyuanVideoPipeline,
        HunyuanVideoTransformer3DModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, LlamaConfig, LlamaModel

    torch.manual_seed(seed)
    transformer = HunyuanVideoTransformer3DModel(
        in_channels=4,
        out_channels=4,
        num_attention_heads=2,
        attention_head_dim=10,
        num_layers=1,
        num_single_layers=1,
        num_refiner_layers=1,
        patch_size=2,
        patch_size_t=1,
        guidance_embeds=True,
        text_embed_dim=16,
        pooled_projection_dim=8,
        rope_axes_dim=(2, 4, 4),
    )
    vae = AutoencoderKLHunyuanVideo(
        latent_channels=4,
        down_block_types=("HunyuanVideoDownBlock3D",) * 4,
        up_block_types=("HunyuanVideoUpBlock3D",) * 4,
        block_out_channels=(8, 8, 8, 8),
        layers_per_block=1,
        norm_num_groups=4,
        scaling_factor=0.476986,
        spatial_compression_ratio=8,
        temporal_compression_ratio=4,
    )
    llama = LlamaModel(
        LlamaConfig(
            vocab_size=len(TINY_WORDS),
            hidden_size=16,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            hidden_act="gelu",
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
    )
    clip = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(TINY_WORDS),
            hidden_size=8,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            projection_dim=32,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
    )
    pipe = HunyuanVideoPipeline(
        transformer=transformer,
        vae=vae,
        scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0),
        text_encoder=llama,
        tokenizer=tiny_tokenizer(),
        text_encoder_2=clip,
        tokenizer_2=tiny_tokenizer(model_max_length=77),  # CLIP's 77 positions
    )
    return quiet_pipeline(pipe)


def call_kwargs(seed: int) -> dict[str, object]:
    """The prompt without the Llama chat template (the tiny tokenizer does not know it), a
    negative prompt (true CFG needs one), the embedded guidance, short text, tensor output."""
    return prompted(seed, prompt_template={"template": "{}", "crop_start": 0}, guidance_scale=6.0)
