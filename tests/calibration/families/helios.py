"""diffusers' ``HeliosPipeline`` built tiny from random weights, for formulas/helios.wf's
``helios``: a one-layer T5 encoder over the tiny tokenizer, a two-block Helios transformer (1x2x2
patch) and the Wan VAE (4x temporal, 8x spatial), with the UniPC Helios scheduler. CFG runs with
``guidance_scale > 1`` (the formula's cfg) and the negative prompt given here."""

from __future__ import annotations

import types

from calibration.examples.tiny import prompted, quiet_pipeline, tiny_t5_config, tiny_tokenizer


def _plain_text_cleaner() -> None:
    """``pipeline_helios.basic_clean`` calls ``ftfy.fix_text`` although the module imports ftfy
    only when it is installed; the project does not depend on it. On the ASCII prompts here
    ``fix_text`` returns its input, which is what this stand-in does."""
    from diffusers.pipelines.helios import pipeline_helios

    if not hasattr(pipeline_helios, "ftfy"):
        pipeline_helios.ftfy = types.SimpleNamespace(fix_text=lambda text: text)  # type: ignore[attr-defined]


def build(seed: int = 0) -> object:
    """A ``diffusers.HeliosPipeline``, tiny, its weights drawn from ``seed``."""
    import torch
    from diffusers import (
        AutoencoderKLWan,
        HeliosPipeline,
        HeliosScheduler,
        HeliosTransformer3DModel,
    )
    from transformers import T5EncoderModel

    _plain_text_cleaner()
    torch.manual_seed(seed)
    vae = AutoencoderKLWan(
        base_dim=3,
        z_dim=16,
        dim_mult=[1, 1, 1, 1],
        num_res_blocks=1,
        temperal_downsample=[False, True, True],
    )
    transformer = HeliosTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=2,
        attention_head_dim=12,
        in_channels=16,
        out_channels=16,
        text_dim=32,
        freq_dim=256,
        ffn_dim=32,
        num_layers=2,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        rope_dim=(4, 4, 4),
        has_multi_term_memory_patch=True,
        guidance_cross_attn=True,
        zero_history_timestep=True,
        is_amplify_history=False,
    )
    pipe = HeliosPipeline(
        transformer=transformer,
        vae=vae,
        scheduler=HeliosScheduler(stage_range=[0, 1], stages=1, use_dynamic_shifting=True),
        text_encoder=T5EncoderModel(tiny_t5_config()),
        tokenizer=tiny_tokenizer(),
    )
    return quiet_pipeline(pipe)


def call_kwargs(seed: int) -> dict[str, object]:
    """The prompt and a negative prompt (CFG), short text, tensor output."""
    return prompted(seed)
