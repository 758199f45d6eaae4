"""A tiny diffusers ``PixArtSigmaPipeline`` (image DiT), random weights, built offline.

Shaped like PixArt-Sigma-XL-2-1024-MS where it matters for scaling: a T5 encoder padded to a fixed
length, a ``PixArtTransformer2DModel`` with 2x2 patches, adaLN-single and learned sigma (8 output
channels for 4 latent ones), sample size 128 (1024 pixels, so the position embedding is recomputed
for any other size), a 4-level (8x) VAE, and a second-order ``DPMSolverMultistepScheduler`` (the
DPM-Solver sampler PixArt ships with). Formulas: ``formulas/pixart_sigma.wf``. Imports diffusers and
transformers lazily (only when called).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from calibration.examples.tiny import quiet_pipeline, tiny_t5_config, tiny_tokenizer, tiny_vae

if TYPE_CHECKING:
    from diffusers.pipelines.pipeline_utils import DiffusionPipeline

#: Formula params of a bounded warmup, the probe and a demo target (>= 4x the probe's work). Three
#: steps or more: DPM-Solver's history of two model outputs is full (formulas/pixart_sigma.wf).
WARMUP: dict[str, int | bool] = {"steps": 3, "height": 64, "width": 64}
PROBE: dict[str, int | bool] = {"steps": 3, "height": 128, "width": 128}
TARGET: dict[str, int | bool] = {"steps": 12, "height": 256, "width": 256}

_TEXT_TOKENS = 16  # max_sequence_length of the call (PixArt-Sigma: 300)


def build(seed: int = 0) -> DiffusionPipeline:
    """A ``diffusers.PixArtSigmaPipeline`` on the CPU, random weights, progress bar off."""
    import torch
    from diffusers import (
        DPMSolverMultistepScheduler,
        PixArtSigmaPipeline,
        PixArtTransformer2DModel,
    )
    from transformers import T5EncoderModel

    torch.manual_seed(seed)
    transformer = PixArtTransformer2DModel(
        num_attention_heads=2,
        attention_head_dim=16,
        in_channels=4,
        out_channels=8,  # learned sigma: the pipeline keeps the first 4 channels
        num_layers=2,
        cross_attention_dim=32,
        sample_size=128,
        patch_size=2,
        caption_channels=32,
        interpolation_scale=2,
        norm_num_groups=4,
        use_additional_conditions=False,  # PixArt-Sigma: no resolution / aspect-ratio embedding
    )
    vae = tiny_vae(seed, sample_size=1024, scaling_factor=0.13025)
    torch.manual_seed(seed)
    text_encoder = T5EncoderModel(tiny_t5_config())
    scheduler = DPMSolverMultistepScheduler(
        beta_schedule="linear",
        beta_start=0.0001,
        beta_end=0.02,
        solver_order=2,
        algorithm_type="dpmsolver++",
        prediction_type="epsilon",
    )
    pipe = PixArtSigmaPipeline(
        tokenizer=tiny_tokenizer(),
        text_encoder=text_encoder,
        vae=vae,
        transformer=transformer,
        scheduler=scheduler,
    )
    return quiet_pipeline(pipe)


def call_kwargs(seed: int) -> dict[str, object]:
    """Constant ``pipe(...)`` arguments (the formula params come on top).

    Resolution binning is off: it snaps a request to the nearest aspect-ratio bin of the model's
    sample size (1024-pixel bins here), far above a CPU demo; the formulas take the generated size.
    """
    import torch

    return {
        "prompt": "a cat dance",
        "guidance_scale": 4.5,
        "max_sequence_length": _TEXT_TOKENS,
        "use_resolution_binning": False,
        "clean_caption": False,  # needs bs4 and ftfy; text cleaning does not change the workload
        "output_type": "pt",
        "generator": torch.Generator().manual_seed(seed),
    }
