"""Wan 2.1 text-to-video (diffusers ``WanPipeline``), tiny, random weights: formulas/wan.wf.

Every weight is random and every config is a few lines here, so nothing is downloaded: the tokenizer
is a word-level ``tokenizers`` model over a handful of words. A run at steps=2, frames=5, 32x32
takes tens of milliseconds on a CPU. Imports diffusers and transformers lazily (only when called).
Tests, calibration and benchmarks build it (``build_tiny_wan``); ``build`` and ``call_kwargs`` are
the example's factory (``calibration.examples``).

Default shapes keep the frame count of the target and shrink the area, so the Wan VAE's two memory
terms (a chunk's working set ~ height x width, the accumulated output ~ frames x height x width)
move together and the warmup and probe determine them at the target (docs/estimators.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from calibration.examples.tiny import TINY_WORDS, quiet_pipeline, tiny_tokenizer

if TYPE_CHECKING:
    import torch
    from diffusers import AutoencoderKLWan, WanTransformer3DModel
    from diffusers.pipelines.pipeline_utils import DiffusionPipeline
    from transformers import UMT5EncoderModel

#: Call arguments that, with the request's params, make a complete tiny Wan run.
TINY_WAN_CALL = {
    "prompt": "a cat dance",
    "negative_prompt": "negative",
    "guidance_scale": 5.0,
    "max_sequence_length": 16,
    "output_type": "pt",
}


def build_tiny_wan(
    seed: int = 0, num_layers: int = 2, dtype: torch.dtype | None = None
) -> DiffusionPipeline:
    """A ``diffusers.WanPipeline``: tiny UMT5 encoder, 3D VAE and transformer, random weights."""
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, WanPipeline

    vae = _vae(seed)
    transformer = _transformer(seed, num_layers)
    text_encoder = _text_encoder(seed)
    pipe = quiet_pipeline(
        WanPipeline(
            tokenizer=tiny_tokenizer(),
            text_encoder=text_encoder,
            vae=vae,
            scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0),
            transformer=transformer,
        )
    )
    if dtype is not None and dtype != torch.float32:  # None: float32, as built
        pipe.to(dtype=dtype)
    return pipe


def _vae(seed: int) -> AutoencoderKLWan:
    """A 3D causal VAE: 8x spatial, 4x temporal compression."""
    import torch
    from diffusers import AutoencoderKLWan

    torch.manual_seed(seed)
    # 16 channels: like the real Wan VAE (96), the decoder's per-chunk working set outweighs the
    # 3-channel video it accumulates, so decoding memory is a working set ~ height x width plus the
    # output ~ frames x height x width (with 3 channels the output alone set the peak).
    return AutoencoderKLWan(
        base_dim=16,
        z_dim=16,
        dim_mult=[1, 1, 1, 1],
        num_res_blocks=1,
        temperal_downsample=[False, True, True],
    )


def _transformer(seed: int, num_layers: int) -> WanTransformer3DModel:
    """``num_layers`` blocks with 1x2x2 patches and rotary positions."""
    import torch
    from diffusers import WanTransformer3DModel

    torch.manual_seed(seed)
    return WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=2,
        attention_head_dim=12,
        in_channels=16,
        out_channels=16,
        text_dim=32,
        freq_dim=256,
        ffn_dim=32,
        num_layers=num_layers,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        rope_max_seq_len=32,
    )


def _text_encoder(seed: int) -> UMT5EncoderModel:
    """A one-layer UMT5 encoder over ``TINY_WORDS``."""
    import torch
    from transformers import UMT5Config, UMT5EncoderModel

    torch.manual_seed(seed)
    config = UMT5Config(
        vocab_size=len(TINY_WORDS),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=1,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
    )
    return UMT5EncoderModel(config)


def tiny_wan_call(
    steps: int = 2, frames: int = 5, height: int = 32, width: int = 32, seed: int = 0
) -> dict[str, object]:
    """Full keyword arguments for one deterministic tiny run."""
    import torch

    return {
        **TINY_WAN_CALL,
        "num_inference_steps": steps,
        "num_frames": frames,
        "height": height,
        "width": width,
        "generator": torch.Generator().manual_seed(seed),
    }


def build(seed: int = 0) -> DiffusionPipeline:
    """A ``diffusers.WanPipeline`` from tiny configs (``build_tiny_wan``)."""
    return build_tiny_wan(seed=seed)


def call_kwargs(seed: int) -> dict[str, object]:
    """The prompt, a negative prompt (CFG), short text, tensor output; params come from `call`."""
    import torch

    return {**TINY_WAN_CALL, "generator": torch.Generator().manual_seed(seed)}


WARMUP = {"steps": 2, "frames": 17, "height": 32, "width": 32}
PROBE = {"steps": 2, "frames": 17, "height": 48, "width": 48}
TARGET = {"steps": 8, "frames": 17, "height": 64, "width": 64}
