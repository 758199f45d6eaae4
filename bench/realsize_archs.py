"""Public diffusion architectures at their real sizes, random weights, nothing downloaded.

Every number below is from the model's published configuration (the ``config.json`` of each
component in the model's diffusers repository, or the model authors' own config module where
diffusers' file restates it), named beside it. Modules are built on the ``meta`` device
(accelerate's ``init_empty_weights``: parameters take no memory, buffers such as rotary tables and
position ids are made for real) and then materialised with seeded random values
(``materialise``); tied parameters stay tied. Tokenizers are word-level models built in memory
that pad to the real sequence length.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from attrs import frozen

if TYPE_CHECKING:
    from diffusers.pipelines.pipeline_utils import DiffusionPipeline

from calibration.examples.tiny import TINY_WORDS, quiet_pipeline, tiny_tokenizer


def materialise(module: torch.nn.Module, seed: int, dtype: torch.dtype) -> torch.nn.Module:
    """Give every meta parameter seeded random values (fan-in scaled, so 30-60 layers stay finite):
    matrices N(0, 1/fan_in), vectors named ``weight`` ones (norm scales), other vectors zeros."""
    generator = torch.Generator().manual_seed(seed)
    done: dict[int, torch.nn.Parameter] = {}
    for sub in module.modules():
        for name, param in list(sub._parameters.items()):
            if param is None or not param.is_meta:
                continue
            if id(param) not in done:  # tied weights (T5's shared embedding) stay one tensor
                value = torch.empty(param.shape, dtype=dtype)
                if value.dim() >= 2:
                    value.normal_(0.0, 1.0 / math.sqrt(value[0].numel()), generator=generator)
                elif name == "weight":
                    value.fill_(1.0)
                else:
                    value.zero_()
                done[id(param)] = torch.nn.Parameter(value, requires_grad=False)
            sub._parameters[name] = done[id(param)]
    for buffer_owner in module.modules():  # buffers were made for real; only the dtype follows
        for name, buffer in list(buffer_owner._buffers.items()):
            if buffer is not None and buffer.is_floating_point() and buffer.dtype != dtype:
                buffer_owner._buffers[name] = buffer.to(dtype)
    return module.eval()


def on_meta(make: Callable[[], torch.nn.Module], seed: int, dtype: torch.dtype) -> Any:
    """``make()`` with its parameters on the meta device, then materialised."""
    from accelerate import init_empty_weights

    with init_empty_weights(include_buffers=False):
        module = make()
    return materialise(module, seed, dtype)


def parameter_count(make: Callable[[], torch.nn.Module]) -> int:
    """A module's parameter count, built on meta only (no memory): checks the configs below."""
    from accelerate import init_empty_weights

    with init_empty_weights(include_buffers=False):
        module = make()
    return sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())


# --- Stable Diffusion 1.5 (stable-diffusion-v1-5/stable-diffusion-v1-5) -------------------------


def sd15_unet() -> torch.nn.Module:
    """unet/config.json: 860M parameters."""
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=64,
        in_channels=4,
        out_channels=4,
        block_out_channels=(320, 640, 1280, 1280),
        layers_per_block=2,
        down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
        up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
        attention_head_dim=8,
        cross_attention_dim=768,
        norm_num_groups=32,
    )


def kl_vae(latent_channels: int = 4, **extra: object) -> torch.nn.Module:
    """vae/config.json of SD 1.5, SDXL and FLUX.1 (84M): 4 levels of 128-512 channels, 8x."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(128, 256, 512, 512),
        layers_per_block=2,
        latent_channels=latent_channels,
        norm_num_groups=32,
        **extra,  # type: ignore[arg-type]
    )


def clip_l(projection: bool = False) -> torch.nn.Module:
    """text_encoder/config.json of SD 1.5 (CLIP ViT-L/14's text tower, 123M): 12 layers of 768."""
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    config = CLIPTextConfig(
        vocab_size=49408,
        hidden_size=768,
        intermediate_size=3072,
        num_hidden_layers=12,
        num_attention_heads=12,
        max_position_embeddings=77,
        hidden_act="quick_gelu",
        projection_dim=768,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=0,
    )
    return (CLIPTextModelWithProjection if projection else CLIPTextModel)(config)


def clip_tokenizer() -> Any:
    """Pads to CLIP's 77 positions, as the real tokenizer does (``padding="max_length"``)."""
    return tiny_tokenizer(TINY_WORDS, model_max_length=77)


def sd15(seed: int, dtype: torch.dtype) -> DiffusionPipeline:
    """StableDiffusionPipeline with SD 1.5's scheduler config (PNDM, skip_prk_steps)."""
    from diffusers import PNDMScheduler, StableDiffusionPipeline

    scheduler = PNDMScheduler(  # scheduler/scheduler_config.json
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        skip_prk_steps=True,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    return quiet_pipeline(
        StableDiffusionPipeline(
            vae=on_meta(lambda: kl_vae(scaling_factor=0.18215), seed + 1, dtype),
            text_encoder=on_meta(clip_l, seed + 2, dtype),
            tokenizer=clip_tokenizer(),
            unet=on_meta(sd15_unet, seed, dtype),
            scheduler=scheduler,
            safety_checker=None,
            feature_extractor=None,
            requires_safety_checker=False,
        )
    )


# --- SDXL base 1.0 (stabilityai/stable-diffusion-xl-base-1.0) -------------------------------------


def sdxl_unet() -> torch.nn.Module:
    """unet/config.json: 2.6B parameters, transformer depth 1/2/10 by level."""
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        sample_size=128,
        in_channels=4,
        out_channels=4,
        block_out_channels=(320, 640, 1280),
        layers_per_block=2,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        transformer_layers_per_block=(1, 2, 10),
        attention_head_dim=(5, 10, 20),
        cross_attention_dim=2048,
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=256,
        projection_class_embeddings_input_dim=2816,
        norm_num_groups=32,
    )


def clip_bigg() -> torch.nn.Module:
    """text_encoder_2/config.json (OpenCLIP ViT-bigG/14's text tower, 695M): 32 layers of 1280."""
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    return CLIPTextModelWithProjection(
        CLIPTextConfig(
            vocab_size=49408,
            hidden_size=1280,
            intermediate_size=5120,
            num_hidden_layers=32,
            num_attention_heads=20,
            max_position_embeddings=77,
            hidden_act="gelu",
            projection_dim=1280,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
    )


def sdxl(seed: int, dtype: torch.dtype) -> DiffusionPipeline:
    """StableDiffusionXLPipeline with the base checkpoint's Euler scheduler config."""
    from diffusers import EulerDiscreteScheduler, StableDiffusionXLPipeline

    return quiet_pipeline(
        StableDiffusionXLPipeline(
            vae=on_meta(lambda: kl_vae(scaling_factor=0.13025), seed + 1, dtype),
            text_encoder=on_meta(clip_l, seed + 2, dtype),
            text_encoder_2=on_meta(clip_bigg, seed + 3, dtype),
            tokenizer=clip_tokenizer(),
            tokenizer_2=clip_tokenizer(),
            unet=on_meta(sdxl_unet, seed, dtype),
            scheduler=EulerDiscreteScheduler(
                beta_start=0.00085,
                beta_end=0.012,
                beta_schedule="scaled_linear",
                steps_offset=1,
                timestep_spacing="leading",
            ),
        )
    )


# --- Wan 2.1 T2V 1.3B (Wan-AI/Wan2.1-T2V-1.3B-Diffusers) -----------------------------------------


def wan13b_transformer() -> torch.nn.Module:
    """transformer/config.json (the authors' wan_t2v_1_3B config: dim 1536 = 12 x 128)."""
    from diffusers import WanTransformer3DModel

    return WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=12,
        attention_head_dim=128,
        in_channels=16,
        out_channels=16,
        text_dim=4096,
        freq_dim=256,
        ffn_dim=8960,
        num_layers=30,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        eps=1e-6,
        rope_max_seq_len=1024,
    )


def wan_vae() -> torch.nn.Module:
    """vae/config.json: AutoencoderKLWan, base_dim 96, z_dim 16, 4x temporal / 8x spatial."""
    from diffusers import AutoencoderKLWan

    return AutoencoderKLWan(
        base_dim=96,
        z_dim=16,
        dim_mult=[1, 2, 4, 4],
        num_res_blocks=2,
        attn_scales=[],
        temperal_downsample=[False, True, True],
        dropout=0.0,
    )


def umt5(layers: int) -> torch.nn.Module:
    """text_encoder/config.json: UMT5-XXL's encoder (d_model 4096, 64 heads of 64, d_ff 10240,
    24 layers, 5.7B). ``layers`` < 24 and a word-level vocabulary make the CPU stand-in: the output
    the transformer reads (512 x 4096) is the same."""
    from transformers import UMT5Config, UMT5EncoderModel

    return UMT5EncoderModel(
        UMT5Config(
            vocab_size=256384 if layers == 24 else len(TINY_WORDS),
            d_model=4096,
            d_kv=64,
            d_ff=10240,
            num_layers=layers,
            num_heads=64,
            relative_attention_num_buckets=32,
            relative_attention_max_distance=128,
            feed_forward_proj="gated-gelu",
        )
    )


def wan13b(seed: int, dtype: torch.dtype, text_layers: int = 24) -> DiffusionPipeline:
    """WanPipeline with the checkpoint's UniPC flow scheduler (flow_shift 3.0, for 480p)."""
    from diffusers import UniPCMultistepScheduler, WanPipeline

    return quiet_pipeline(
        WanPipeline(
            tokenizer=tiny_tokenizer(TINY_WORDS, model_max_length=512),
            text_encoder=on_meta(lambda: umt5(text_layers), seed + 2, dtype),
            vae=on_meta(wan_vae, seed + 1, torch.float32),  # the pipeline runs its VAE in fp32
            scheduler=UniPCMultistepScheduler(
                prediction_type="flow_prediction",
                use_flow_sigmas=True,
                num_train_timesteps=1000,
                flow_shift=3.0,
            ),
            transformer=on_meta(wan13b_transformer, seed, dtype),
        )
    )


# --- FLUX.1-dev (black-forest-labs/FLUX.1-dev): for a GPU -----------------------------------------


def flux_transformer() -> torch.nn.Module:
    """transformer/config.json: 19 double- and 38 single-stream blocks of 24 x 128, 11.9B."""
    from diffusers import FluxTransformer2DModel

    return FluxTransformer2DModel(
        patch_size=1,
        in_channels=64,
        num_layers=19,
        num_single_layers=38,
        attention_head_dim=128,
        num_attention_heads=24,
        joint_attention_dim=4096,
        pooled_projection_dim=768,
        guidance_embeds=True,
        axes_dims_rope=(16, 56, 56),
    )


def t5_xxl() -> torch.nn.Module:
    """text_encoder_2/config.json: T5 v1.1 XXL's encoder (4.8B)."""
    from transformers import T5Config, T5EncoderModel

    return T5EncoderModel(
        T5Config(
            vocab_size=32128,
            d_model=4096,
            d_kv=64,
            d_ff=10240,
            num_layers=24,
            num_heads=64,
            feed_forward_proj="gated-gelu",
        )
    )


def flux_dev(seed: int, dtype: torch.dtype) -> DiffusionPipeline:
    """FluxPipeline with the checkpoint's flow-matching scheduler (dynamic shifting)."""
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline

    return quiet_pipeline(
        FluxPipeline(
            scheduler=FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True),
            vae=on_meta(
                lambda: kl_vae(
                    16,
                    scaling_factor=0.3611,
                    shift_factor=0.1159,
                    use_quant_conv=False,
                    use_post_quant_conv=False,
                ),
                seed + 1,
                dtype,
            ),
            text_encoder=on_meta(lambda: clip_l(), seed + 2, dtype),
            tokenizer=clip_tokenizer(),
            text_encoder_2=on_meta(t5_xxl, seed + 3, dtype),
            tokenizer_2=tiny_tokenizer(TINY_WORDS, model_max_length=512),
            transformer=on_meta(flux_transformer, seed, dtype),
        )
    )


@frozen
class Published:
    """A component's parameter count as its model card or paper states it (the configs' check)."""

    name: str
    make: Callable[[], torch.nn.Module]
    millions: float  # published
    source: str


PUBLISHED = (
    Published("SD 1.5 UNet", sd15_unet, 860, "SD 1.5 model card: 860M UNet"),
    Published("SDXL UNet", sdxl_unet, 2567, "SDXL paper, table 1: 2.6B UNet"),
    Published("Wan 2.1 1.3B DiT", wan13b_transformer, 1300, "Wan 2.1 model card: 1.3B"),
    Published("FLUX.1-dev DiT", flux_transformer, 11900, "FLUX.1-dev model card: 12B"),
    Published("KL VAE (SD)", kl_vae, 83.7, "SD VAE: 83.7M"),
    Published("CLIP-L text", clip_l, 123, "CLIP ViT-L/14 text tower: 123M"),
)
