"""A pipeline whose text tower runs through a method other than ``forward``, for the tests of
component accounting and of calibrating under offload (its formulas: ``two_tower.wf`` beside it).

Like AudioLDM2's CLAP text encoder (``get_text_features``), the text tower holds most of the
weights and its ``forward`` is never called; ``spare`` is a component the pipeline never runs.
A ``diffusers.DiffusionPipeline`` with a ``model_cpu_offload_seq``, so diffusers' own model CPU
offload applies to it; random weights, built offline.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers import DiffusionPipeline
from torch import nn

WIDTH = 16
#: The text tower's embedding rows (about 530 kB of weights) and the denoiser's MLP width (about
#: 270 kB): each fits a 640 kB device with its work, both together do not.
VOCAB = 1024
HIDDEN = 1024


class Part(nn.Module):
    """A component as diffusers' pipeline code expects one: it tells its dtype and device."""

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device


class TextTower(Part):
    """A text tower used only through ``get_text_features`` (``forward`` is never called)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH * 8)
        self.project = nn.Linear(WIDTH * 8, WIDTH)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        raise AssertionError("the pipeline runs get_text_features, never forward")

    def get_text_features(self, ids: torch.Tensor) -> torch.Tensor:
        """Pooled text features (CLAP's entry point)."""
        return self.project(self.embed(ids).mean(dim=1))


class Denoiser(Part):
    """Two residual MLP blocks over the latent tokens, conditioned on the text features."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(WIDTH, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, WIDTH))
            for _ in range(2)
        )

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x + cond[:, None, :])
        return x


class Spare(Part):
    """A component the pipeline holds but never runs."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(WIDTH, WIDTH)


class TwoTowerPipeline(DiffusionPipeline):
    """text_tower.get_text_features, then the denoiser once a step (``callback_on_step_end``)."""

    model_cpu_offload_seq = "text_tower->denoiser"
    text_tower: TextTower
    denoiser: Denoiser
    spare: Spare

    def __init__(self, text_tower: TextTower, denoiser: Denoiser, spare: Spare) -> None:
        super().__init__()
        self.register_modules(  # type: ignore[attr-defined]  # diffusers' lazy module: untyped
            text_tower=text_tower, denoiser=denoiser, spare=spare
        )

    @torch.no_grad()
    def __call__(
        self,
        num_inference_steps: int = 4,
        size: int = 64,
        callback_on_step_end: Any = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        ids = torch.arange(8)[None, :]
        cond = self.text_tower.get_text_features(ids)
        x = torch.zeros(1, size, WIDTH)
        for step in range(num_inference_steps):
            x = self.denoiser(x, cond)
            if callback_on_step_end is not None:
                callback_on_step_end(self, step, step, {})
        self.maybe_free_model_hooks()  # type: ignore[attr-defined]  # as register_modules
        return x


def build(seed: int = 0) -> TwoTowerPipeline:
    """The pipeline with random weights (seeded)."""
    torch.manual_seed(seed)
    return TwoTowerPipeline(TextTower(), Denoiser(), Spare())


def call_kwargs(seed: int = 0) -> dict[str, object]:
    """No prompt, no generator: the pipeline is deterministic."""
    return {}


PROBE = {"steps": 1, "size": 16}
TARGET = {"steps": 4, "size": 32}
