"""SD 1.5 at its real size as a ``--pipeline`` factory for `dslc serve` and bench/serve_ready.py:
``bench/realsize_serve.py:build`` with ``--formulas tests/calibration/data/custom_sd.wf --name
custom_sd``. The published configs with random weights (``bench/realsize_archs.py``), fp32, and a
small CPU target (256x256, 2 steps) so that a cold start's probes take minutes, not an hour."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.realsize import CASES

_CASE = CASES["sd15-cpu"]
FORMULAS = _CASE.formula_file  # relative to the repository
NAME = _CASE.pipeline
WARMUP = {"steps": 2, "height": 64, "width": 64}
PROBE = {"steps": 2, "height": 128, "width": 128}
TARGET = {"steps": 2, "height": 256, "width": 256}


def build(seed: int) -> object:
    """The real-size SD 1.5 pipeline (weights drawn from ``seed``)."""
    return _CASE.build(seed, _CASE.dtype)


def call_kwargs(seed: int) -> dict[str, object]:
    """The constant call arguments (prompt, tensor output) and a seeded generator."""
    return {**_CASE.call, "generator": torch.Generator("cpu").manual_seed(seed)}
