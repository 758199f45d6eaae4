"""Tiny parts the example factories share: a word-level tokenizer, a T5 config, an 8x VAE.

Imports tokenizers, transformers and diffusers only when called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diffusers import AutoencoderKL
    from diffusers.pipelines.pipeline_utils import DiffusionPipeline
    from transformers import PreTrainedTokenizerFast, T5Config

#: The tokenizer's whole vocabulary: every text encoder's ``vocab_size`` is its length.
TINY_WORDS = (
    "<pad>",
    "</s>",
    "<unk>",
    "a",
    "cat",
    "dance",
    "monkey",
    "negative",
    "video",
    "of",
    "the",
)

#: A 4-level (8x) AutoencoderKL with 16 channels a level: enough that its working set, not the
#: decoded image, sets the decoding peak, as in a real VAE.
TINY_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [16, 16, 16, 16],
    "layers_per_block": 1,
    "latent_channels": 4,
    "norm_num_groups": 4,
}


def tiny_tokenizer(words: Sequence[str] = TINY_WORDS, **options: int) -> PreTrainedTokenizerFast:
    """A word-level fast tokenizer over ``words`` built in memory (the pipeline pads to
    max_sequence_length; ``options`` such as ``model_max_length`` go to the tokenizer)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", **options
    )


def tiny_t5_config() -> T5Config:
    """A one-layer T5 encoder's config over ``TINY_WORDS`` (FLUX, CogVideoX, PixArt-Sigma)."""
    from transformers import T5Config

    return T5Config(
        vocab_size=len(TINY_WORDS),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=1,
        num_heads=4,
        relative_attention_num_buckets=8,
    )


def tiny_vae(seed: int, **overrides: object) -> AutoencoderKL:
    """``diffusers.AutoencoderKL(**TINY_VAE, **overrides)``, its weights drawn from ``seed``."""
    import torch
    from diffusers import AutoencoderKL

    torch.manual_seed(seed)
    return AutoencoderKL(**{**TINY_VAE, **overrides})


def quiet_pipeline(pipe: Any) -> DiffusionPipeline:
    """``pipe`` with its progress bar off, typed as the diffusers pipeline it is.

    ``Any``: diffusers' top-level names (``diffusers.WanPipeline``) are typed as its dummy objects
    (``diffusers.utils.dummy_*``), not as the pipelines they are at run time.
    """
    pipe.set_progress_bar_config(disable=True)
    return pipe


#: A prompt, a negative prompt (true CFG runs only with one), short text, tensor output.
PROMPTS: dict[str, object] = {
    "prompt": "a cat dance",
    "negative_prompt": "negative",
    "max_sequence_length": 16,
    "output_type": "pt",
}


def prompted(seed: int, **extra: object) -> dict[str, object]:
    """``PROMPTS`` with a pipeline's own ``extra`` arguments and a generator seeded ``seed``: the
    call arguments of a tiny pipeline."""
    import torch

    return {**PROMPTS, **extra, "generator": torch.Generator().manual_seed(seed)}
