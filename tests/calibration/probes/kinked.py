"""A diffusers-free pipeline whose memory follows a formula with a kink (``min``, ``max``, clamp or
an ``if``), for the calibrate loop's tests: real torch tensors, measured by the real recorder.

``Kinked`` has a ``transformer`` (opens DenoisingStage, one iteration per step) and a ``vae`` whose
``decode`` opens DecodingStage; each allocates exactly the bytes its stage's terms say (uint8
tensors held together, so the stage's peak above the baseline is their sum) and lets them go.
``formula_text`` writes the matching `.wf` file, so the formula is right and every miss is the
calibration's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from attrs import frozen
from torch import nn

from artifact.point import Point


@frozen
class Kink:
    """One kinked memory term of DecodingStage along ``frames``, times ``height * width``."""

    kind: str  # "min", "max", "clamp" or "if"
    at: int  # the threshold in frames
    low: int = 1  # the clamp's lower end

    @property
    def text(self) -> str:
        """The term as the formula file writes it."""
        if self.kind == "min":
            inner = f"min(frames, {self.at})"
        elif self.kind == "max":
            inner = f"max(frames, {self.at})"
        elif self.kind == "clamp":
            inner = f"max({self.low}, min(frames, {self.at}))"
        else:
            inner = f"(if frames > {self.at} then 2 * frames else frames)"
        return f"{inner} * height * width"

    def value(self, params: Point) -> int:
        """The term at ``params``, as the formula evaluates it."""
        f, area = int(params["frames"]), int(params["height"]) * int(params["width"])
        if self.kind == "min":
            inner = min(f, self.at)
        elif self.kind == "max":
            inner = max(f, self.at)
        elif self.kind == "clamp":
            inner = max(self.low, min(f, self.at))
        else:
            inner = 2 * f if f > self.at else f
        return inner * area


def _formulas(name: str, decode_memory: str) -> str:
    """The pipeline's formulas, DecodingStage's memory as given (the rest as ``Kinked`` holds)."""
    return f"""
pipeline {name} {{
    param steps: int = 2 in [1, 50]
    param frames: int = 24 in [1, 64]
    param height: int = 96 in [16, 256] where height % 16 == 0
    param width: int = 96 in [16, 256] where width % 16 == 0

    call num_inference_steps = steps
    call num_frames = frames
    call height = height
    call width = width
    probe frames, height, width

    stage DenoisingStage uses transformer per step {{
        iterations = steps
        memory ~ frames * height * width
        time ~ frames * height * width
    }}
    stage DecodingStage uses vae.decode {{
        memory ~ {decode_memory}
        time ~ frames * height * width
    }}
}}
"""


def formula_text(kink: Kink, slopes: tuple[int, int] = (1, 1)) -> str:
    """The pipeline's formulas: DecodingStage's memory has the kinked term and a plain one."""
    return _formulas(
        "kinked", f"[{slopes[0]} * {kink.text}, {slopes[1]} * frames * height * width]"
    )


#: The same pipeline with a plain decode, `memory ~ frames * height * width` (no kinked term):
#: right for ``Kinked(Kink("min", 64))`` (its decode holds twice that), wrong for a decode that
#: holds more.
PLAIN = _formulas("extra", "frames * height * width")


class Transformer(nn.Module):
    """One step: a work buffer of ``frames * height * width`` bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, frames: int, height: int, width: int) -> torch.Tensor:
        work = torch.ones(frames * height * width, dtype=torch.uint8)
        return work.sum()


class Decoder(nn.Module):
    """The decode: the kinked term's bytes and the plain term's, held together."""

    def __init__(self, kink: Kink, slopes: tuple[int, int]) -> None:
        super().__init__()
        self.kink, self.slopes = kink, slopes
        self.proj = nn.Linear(4, 4)

    def decode(self, params: Point) -> int:
        chunked = torch.ones(self.slopes[0] * self.kink.value(params), dtype=torch.uint8)
        area = int(params["frames"]) * int(params["height"]) * int(params["width"])
        frames = torch.ones(self.slopes[1] * area, dtype=torch.uint8)
        return int(chunked.sum()) + int(frames.sum())


StepEnd = Callable[[object, int, object, dict[str, object]], dict[str, object]]


class Kinked:
    """The pipeline: ``steps`` transformer calls (each a step), then one decode."""

    def __init__(self, kink: Kink, slopes: tuple[int, int] = (1, 1)) -> None:
        self.transformer = Transformer()
        self.vae = Decoder(kink, slopes)

    @property
    def components(self) -> dict[str, nn.Module]:
        return {"transformer": self.transformer, "vae": self.vae}

    def __call__(
        self,
        num_inference_steps: int = 2,
        num_frames: int = 24,
        height: int = 96,
        width: int = 96,
        callback_on_step_end: StepEnd | None = None,
        generator: torch.Generator | None = None,
    ) -> int:
        with torch.no_grad():
            for step in range(num_inference_steps):
                self.transformer(num_frames, height, width)
                if callback_on_step_end is not None:
                    callback_on_step_end(self, step, step, {})
            params = {"frames": num_frames, "height": height, "width": width}
            return self.vae.decode(params)
