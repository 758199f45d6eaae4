"""diffusers' ``QwenImagePipeline`` built tiny from random weights, for formulas/qwen_image.wf's
``qwen_image``: a two-layer Qwen2.5-VL text model over the tiny tokenizer, a two-block transformer
(2x2 packing) and a 3-level Qwen-Image VAE (8x). True CFG runs with ``true_cfg_scale > 1`` (the
formula's cfg) and the negative prompt given here."""

from __future__ import annotations

from calibration.examples.tiny import TINY_WORDS, prompted, quiet_pipeline, tiny_tokenizer

#: The chat template leaves a few tokens of "a cat dance" after its 34 dropped ones; the formula's
#: `prompt_tokens` only shifts its terms, so any fixed value calibrates.
PROMPT_TOKENS = 8


def build(seed: int = 0) -> object:
    """A ``diffusers.QwenImagePipeline``, tiny, its weights drawn from ``seed``."""
    import torch
    from diffusers import (
        AutoencoderKLQwenImage,
        FlowMatchEulerDiscreteScheduler,
        QwenImagePipeline,
        QwenImageTransformer2DModel,
    )
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    torch.manual_seed(seed)
    transformer = QwenImageTransformer2DModel(
        patch_size=2,
        in_channels=16,
        out_channels=4,
        num_layers=2,
        attention_head_dim=16,
        num_attention_heads=3,
        joint_attention_dim=16,
        guidance_embeds=False,
        axes_dims_rope=(8, 4, 4),
    )
    vae = AutoencoderKLQwenImage(
        base_dim=24,
        z_dim=4,
        dim_mult=[1, 2, 4],
        num_res_blocks=1,
        temperal_downsample=[False, True],
        latents_mean=[0.0] * 4,
        latents_std=[1.0] * 4,
    )
    text = {
        "hidden_size": 16,
        "intermediate_size": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"},
        "rope_theta": 1000000.0,
        "vocab_size": len(TINY_WORDS),
    }
    vision = {"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2}
    config = Qwen2_5_VLConfig(text_config=text, vision_config={**vision, "out_hidden_size": 16})
    pipe = QwenImagePipeline(
        transformer=transformer,
        vae=vae,
        scheduler=FlowMatchEulerDiscreteScheduler(),
        text_encoder=Qwen2_5_VLForConditionalGeneration(config).eval(),
        tokenizer=tiny_tokenizer(),
    )
    return quiet_pipeline(pipe)


def call_kwargs(seed: int) -> dict[str, object]:
    """The prompt and a negative prompt (true CFG needs one), short text, tensor output."""
    return prompted(seed)
