"""A pipeline class the repository never mentions, as a newcomer brings one: diffusers'
``AuraFlowPipeline`` built tiny from random weights (a UMT5 encoder over the tiny tokenizer, a
one-block MMDiT and one single DiT, the tiny 8x VAE), for the tests that save it with
``save_pretrained`` and take it through ``--model DIR`` (issue 43's acceptance)."""

from __future__ import annotations

from calibration.examples.tiny import TINY_WORDS, quiet_pipeline, tiny_tokenizer, tiny_vae

#: The skeleton a user writes for it: params, `call` facts and the probe group, no stages. Its
#: default workload is small: the tiny transformer's position table holds 32 x 32 patches.
SKELETON = """pipeline aura_flow {
    param steps: int = 8 in [1, 1000]
    param height: int = 256 in [16, 512] where height % 16 == 0
    param width: int = 256 in [16, 512] where width % 16 == 0

    call num_inference_steps = steps
    call height = height
    call width = width
    probe height, width
}
"""


def build(seed: int = 0) -> object:
    """A ``diffusers.AuraFlowPipeline``, tiny, its weights drawn from ``seed``."""
    import torch
    from diffusers import (
        AuraFlowPipeline,
        AuraFlowTransformer2DModel,
        FlowMatchEulerDiscreteScheduler,
    )
    from transformers import UMT5Config, UMT5EncoderModel

    vae = tiny_vae(seed)
    torch.manual_seed(seed)
    transformer = AuraFlowTransformer2DModel(
        sample_size=32,
        patch_size=2,
        in_channels=4,
        num_mmdit_layers=1,
        num_single_dit_layers=1,
        attention_head_dim=8,
        num_attention_heads=4,
        joint_attention_dim=32,
        caption_projection_dim=32,
        out_channels=4,
        pos_embed_max_size=1024,
    )
    encoder = UMT5EncoderModel(
        UMT5Config(
            vocab_size=len(TINY_WORDS),
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=1,
            num_heads=4,
            relative_attention_num_buckets=8,
        )
    )
    pipe = AuraFlowPipeline(
        tokenizer=tiny_tokenizer(),
        text_encoder=encoder,
        vae=vae,
        transformer=transformer,
        scheduler=FlowMatchEulerDiscreteScheduler(),
    )
    return quiet_pipeline(pipe)
