"""Built-in example pipelines: real diffusers pipelines from tiny configs with random weights.

Each example is a module with ``build(seed)`` (a diffusers pipeline on the CPU, nothing downloaded),
``call_kwargs(seed)`` (the constant ``pipe(...)`` arguments: prompt, output type, generator; the
workload's arguments come from the formulas' `call` lines) and demo shapes ``WARMUP``, ``PROBE`` and
``TARGET``: the formulas' own default workloads (e.g. 81 frames at 480x832) are far too big for a
CPU demo. Which component opens which stage is declared in the formula file, not here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING

from attrs import frozen

from artifact.point import Point
from calibration.core.shapes import Shapes

if TYPE_CHECKING:
    from diffusers import DiffusionPipeline


def _params(value: Point) -> Point:
    return MappingProxyType(dict(value))


@frozen
class Example:
    """One calibratable example: its module (factory, call, shapes) and its formulas."""

    name: str
    description: str
    formula_file: str  # relative to the formulas folder
    pipeline: str  # the pipeline in that file
    module: str  # calibration.examples.<module>

    def _load(self) -> ModuleType:
        return importlib.import_module(f"calibration.examples.{self.module}")

    @property
    def build(self) -> Callable[[int], DiffusionPipeline]:
        """seed -> the diffusers pipeline on the CPU."""
        build: Callable[[int], DiffusionPipeline] = self._load().build
        return build

    @property
    def call_kwargs(self) -> Callable[[int], dict[str, object]]:
        """seed -> the constant ``pipe(...)`` arguments."""
        kwargs: Callable[[int], dict[str, object]] = self._load().call_kwargs
        return kwargs

    @property
    def shapes(self) -> Shapes:
        """The demo warmup, probe and target."""
        module = self._load()
        return Shapes(_params(module.WARMUP), _params(module.PROBE), _params(module.TARGET))

    @property
    def warmup(self) -> Point:
        return self.shapes.warmup

    @property
    def probe(self) -> Point:
        return self.shapes.probe

    @property
    def target(self) -> Point:
        return self.shapes.target


_ALL = (
    Example(
        "wan",
        "diffusers WanPipeline (UMT5, WanTransformer3DModel, AutoencoderKLWan), tiny, random "
        "weights",
        "wan.wf",
        "wan2_1_t2v_1_3b",
        "wan",
    ),
    Example(
        "flux",
        "diffusers FluxPipeline (CLIP + T5, FluxTransformer2DModel, AutoencoderKL), tiny, random "
        "weights",
        "flux.wf",
        "flux1_dev",
        "flux",
    ),
    Example(
        "sdxl",
        "diffusers StableDiffusionXLPipeline (two CLIP encoders, UNet2DConditionModel, "
        "AutoencoderKL), tiny, random weights",
        "sdxl.wf",
        "sdxl_base",
        "sdxl",
    ),
    Example(
        "cogvideox",
        "diffusers CogVideoXPipeline (T5, CogVideoXTransformer3DModel, AutoencoderKLCogVideoX), "
        "tiny, random weights",
        "cogvideox.wf",
        "cogvideox_2b",
        "cogvideox",
    ),
    Example(
        "pixart",
        "diffusers PixArtSigmaPipeline (T5, PixArtTransformer2DModel, AutoencoderKL), tiny, "
        "random weights",
        "pixart_sigma.wf",
        "pixart_sigma_1024",
        "pixart_sigma",
    ),
)

EXAMPLES: Mapping[str, Example] = MappingProxyType({e.name: e for e in _ALL})
