"""A tiny Stable Diffusion 1.5-shaped pipeline that a user's own factory may return.

Not a built-in example (no ``--example``): the factory a user writes, as the tutorial's
``my_sd_pipeline.py`` and ``tests/calibration/custom_pipeline.py`` do, returns it. A tiny diffusers
``StableDiffusionPipeline`` shaped like Stable Diffusion 1.5 (one CLIP text
encoder, a 4-level UNet2DConditionModel with cross-attention on its first three levels, a 4-level
8x AutoencoderKL, the PNDM scheduler of the SD 1.5 checkpoint), random weights, built offline.
Its formulas: ``tests/calibration/data/custom_sd.wf`` (the tutorial's ``my_sd.wf`` is that file
without the PNDM history term).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from calibration.examples.tiny import quiet_pipeline, tiny_vae

if TYPE_CHECKING:
    from diffusers.pipelines.pipeline_utils import DiffusionPipeline
    from transformers import PreTrainedTokenizerFast

_WORDS = ("<pad>", "</s>", "<unk>", "a", "photo", "of", "an", "astronaut", "riding", "horse")
_TEXT_TOKENS = 16  # the tokenizer pads to this; the CLIP position table has as many entries


def _tokenizer() -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(_WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=_TEXT_TOKENS,
    )


def build(seed: int = 0) -> DiffusionPipeline:
    """A ``diffusers.StableDiffusionPipeline`` on the CPU, random weights, progress bar off."""
    from diffusers import PNDMScheduler, StableDiffusionPipeline
    from transformers import CLIPTextConfig, CLIPTextModel

    unet = _unet(seed)
    vae = tiny_vae(seed, sample_size=512)
    torch.manual_seed(seed)
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(_WORDS),
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=_TEXT_TOKENS,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
    )
    scheduler = PNDMScheduler(  # SD 1.5's scheduler config
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        skip_prk_steps=True,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    pipe = StableDiffusionPipeline(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=_tokenizer(),
        unet=unet,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    return quiet_pipeline(pipe)


def _unet(seed: int) -> object:
    """SD 1.5's UNet shape, tiny: 4 levels, cross-attention on the first three."""
    from diffusers import UNet2DConditionModel

    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        sample_size=64,  # SD 1.5: 64 latents = 512 pixels
        in_channels=4,
        out_channels=4,
        block_out_channels=(16, 32, 32, 32),
        layers_per_block=1,
        down_block_types=(
            "CrossAttnDownBlock2D",
            "CrossAttnDownBlock2D",
            "CrossAttnDownBlock2D",
            "DownBlock2D",
        ),
        up_block_types=(
            "UpBlock2D",
            "CrossAttnUpBlock2D",
            "CrossAttnUpBlock2D",
            "CrossAttnUpBlock2D",
        ),
        attention_head_dim=8,
        cross_attention_dim=32,
        norm_num_groups=8,
    )
    return unet


def call_kwargs(seed: int = 0) -> dict[str, object]:
    """Constant ``pipe(...)`` arguments (the formula params come on top)."""
    return {
        "prompt": "a photo of an astronaut riding a horse",
        "guidance_scale": 7.5,
        "output_type": "pt",
        "generator": torch.Generator().manual_seed(seed),
    }
