"""Example pipelines for `dslc calibrate` and the accuracy benchmark: real diffusers pipelines,
tiny.

Each example is a real diffusers pipeline built from small configs with random weights (nothing is
downloaded), the formula file and pipeline that describe it, how its components map to formula
stages, and default shapes: a bounded warmup, the probe, and a demo target. The formulas' own
default workloads (e.g. 81 frames at 480x832) are far too big for a CPU demo, so calibrate targets
an admissible demo point instead.

Default shapes keep the frame count of the target and shrink the area, so the Wan VAE's two memory
terms (a chunk's working set ~ height x width, the accumulated output ~ frames x height x width)
move together and the warmup and probe determine them at the target (docs/estimators.md).

Imports torch, diffusers and transformers lazily (only when an example is built).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from attrs import field, frozen

Params = Mapping[str, int | bool]


def _params(value: Params) -> Params:
    return MappingProxyType(dict(value))


@frozen
class Example:
    """One calibratable example: how to build and call the pipeline, and its formulas."""

    name: str
    description: str
    formula_file: str  # relative to the formulas folder
    pipeline: str  # the pipeline in that file
    build: Callable[[int], Any]  # seed -> a diffusers pipeline on the CPU
    call_kwargs: Callable[
        [int], dict[str, Any]
    ]  # seed -> constant pipe(...) arguments (params excluded)
    call_args: Mapping[str, str]  # formula param -> pipe(...) keyword
    stage_for: Mapping[str, str]  # component -> formula stage (opened when it runs)
    iterative: frozenset[str]
    warmup: Params = field(converter=_params)
    probe: Params = field(converter=_params)
    target: Params = field(converter=_params)
    entry_points: Mapping[str, str] = field(factory=lambda: {"vae": "decode"})
    layerwise: tuple[str, ...] = ("transformer",)

    def kwargs_for(self, params: Params, seed: int) -> dict[str, Any]:
        """The full ``pipe(...)`` keyword arguments at ``params``."""
        kwargs = self.call_kwargs(seed)
        for param, arg in self.call_args.items():
            if param in params:
                kwargs[arg] = params[param]
        return kwargs


# --- Wan 2.1 text-to-video ------------------------------------------------------------------------


def _build_wan(seed: int) -> Any:
    from runtime.measure.examples import build_tiny_wan

    return build_tiny_wan(seed=seed)


def _wan_kwargs(seed: int) -> dict[str, Any]:
    import torch

    from runtime.measure.examples import TINY_WAN_CALL

    return {**TINY_WAN_CALL, "generator": torch.Generator().manual_seed(seed)}


WAN = Example(
    name="wan",
    description="diffusers WanPipeline (UMT5, WanTransformer3DModel, AutoencoderKLWan), tiny, "
    "random weights",
    formula_file="wan.wf",
    pipeline="wan2_1_t2v_1_3b",
    build=_build_wan,
    call_kwargs=_wan_kwargs,
    call_args={
        "steps": "num_inference_steps",
        "frames": "num_frames",
        "height": "height",
        "width": "width",
    },
    stage_for={
        "text_encoder": "TextEncodingStage",
        "transformer": "DenoisingStage",
        "vae": "DecodingStage",
    },
    iterative=frozenset({"DenoisingStage"}),
    warmup={"steps": 2, "frames": 17, "height": 32, "width": 32},
    probe={"steps": 2, "frames": 17, "height": 48, "width": 48},
    target={"steps": 8, "frames": 17, "height": 64, "width": 64},
)


# --- FLUX.1 text-to-image -------------------------------------------------------------------------

_FLUX_WORDS = 11  # the vocabulary of runtime.measure.examples.tiny_tokenizer


def build_tiny_flux(seed: int = 0) -> Any:
    """A ``diffusers.FluxPipeline``: tiny CLIP and T5 encoders, a 4-level VAE (8x) and a 2-block
    transformer.
    """
    import torch
    from diffusers import (
        AutoencoderKL,
        FlowMatchEulerDiscreteScheduler,
        FluxPipeline,
        FluxTransformer2DModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    from runtime.measure.examples import tiny_tokenizer

    torch.manual_seed(seed)
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 4,
        up_block_types=["UpDecoderBlock2D"] * 4,
        block_out_channels=[8, 8, 8, 8],
        layers_per_block=1,
        latent_channels=16,
        norm_num_groups=4,
        use_quant_conv=False,
        use_post_quant_conv=False,
        shift_factor=0.0609,
        scaling_factor=1.5035,
    )
    torch.manual_seed(seed)
    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=64,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        guidance_embeds=True,
        axes_dims_rope=(4, 6, 6),
    )
    torch.manual_seed(seed)
    clip = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=_FLUX_WORDS,
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=1,
            num_attention_heads=4,
            max_position_embeddings=16,
            projection_dim=32,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
    )
    t5 = T5EncoderModel(
        T5Config(
            vocab_size=_FLUX_WORDS,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=1,
            num_heads=4,
            relative_attention_num_buckets=8,
        )
    )
    tokenizer = tiny_tokenizer()
    tokenizer.model_max_length = 16  # CLIP pads to this (its position table has 16 entries)
    pipe = FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=clip,
        tokenizer=tokenizer,
        text_encoder_2=t5,
        tokenizer_2=tiny_tokenizer(),
        transformer=transformer,
    )
    pipe.set_progress_bar_config(disable=True)  # type: ignore[attr-defined]
    return pipe


def _flux_kwargs(seed: int) -> dict[str, Any]:
    import torch

    return {
        "prompt": "a cat dance",
        "guidance_scale": 3.5,
        "max_sequence_length": 16,
        "output_type": "pt",
        "generator": torch.Generator().manual_seed(seed),
    }


FLUX = Example(
    name="flux",
    description="diffusers FluxPipeline (CLIP + T5, FluxTransformer2DModel, AutoencoderKL), "
    "tiny, random weights",
    formula_file="flux.wf",
    pipeline="flux1_dev",
    build=build_tiny_flux,
    call_kwargs=_flux_kwargs,
    call_args={"steps": "num_inference_steps", "height": "height", "width": "width"},
    stage_for={
        "text_encoder": "TextEncodingStage",
        "text_encoder_2": "TextEncodingStage",
        "transformer": "DenoisingStage",
        "vae": "DecodingStage",
    },
    iterative=frozenset({"DenoisingStage"}),
    warmup={"steps": 2, "height": 64, "width": 64},
    probe={"steps": 2, "height": 96, "width": 96},
    target={"steps": 8, "height": 128, "width": 128},
)

EXAMPLES: Mapping[str, Example] = MappingProxyType({e.name: e for e in (WAN, FLUX)})
