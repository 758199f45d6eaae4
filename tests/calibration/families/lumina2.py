"""diffusers' ``Lumina2Pipeline`` (Lumina-Image 2.0) built tiny from random weights, a family no
formula here describes (issue 39 item 1 on unseen pipelines): a one-layer Gemma 2 over the tiny
tokenizer, a Lumina 2 transformer with three block lists (a noise refiner, a context refiner and two
main layers, 256 wide: its blocks outweigh the small sizes' activations, as a real model's do) and
the tiny 8x VAE. CFG runs with ``guidance_scale > 1`` and the negative prompt given here."""

from __future__ import annotations

from calibration.examples.tiny import TINY_WORDS, prompted, quiet_pipeline, tiny_tokenizer, tiny_vae

#: The skeleton a user writes for it: params, `call` facts and the probe group, no stages.
SKELETON = """pipeline lumina2 {
    param steps: int = 30 in [1, 1000]
    param height: int = 128 in [16, 256] where height % 16 == 0
    param width: int = 128 in [16, 256] where width % 16 == 0
    param cfg: bool = true

    call num_inference_steps = steps
    call height = height
    call width = width
    call guidance_scale = if cfg then 4 else 1
    probe height, width
}
"""


def build(seed: int = 0) -> object:
    """A ``diffusers.Lumina2Pipeline``, tiny, its weights drawn from ``seed``."""
    import torch
    from diffusers import (
        FlowMatchEulerDiscreteScheduler,
        Lumina2Pipeline,
        Lumina2Transformer2DModel,
    )
    from transformers import Gemma2Config, Gemma2Model

    vae = tiny_vae(seed, shift_factor=0.0609, scaling_factor=1.5035)
    torch.manual_seed(seed)
    transformer = Lumina2Transformer2DModel(
        sample_size=16,
        patch_size=2,
        in_channels=4,
        hidden_size=256,
        num_layers=2,
        num_refiner_layers=1,
        num_attention_heads=4,
        num_kv_heads=2,
        multiple_of=16,
        axes_dim_rope=(16, 24, 24),
        axes_lens=(128, 32, 32),
        cap_feat_dim=8,
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
    pipe = Lumina2Pipeline(
        transformer=transformer,
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=encoder,
        tokenizer=tiny_tokenizer(),
    )
    return quiet_pipeline(pipe)


def call_kwargs(seed: int) -> dict[str, object]:
    """The prompt and a negative prompt (CFG), short text, tensor output."""
    return prompted(seed)
