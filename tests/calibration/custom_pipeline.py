"""A user's own pipeline for `dslc calibrate --pipeline tests/calibration/custom_pipeline.py:build`.

The tiny SD 1.5-shaped pipeline of ``calibration.examples.tiny_sd`` (random weights, built
offline), loaded from a file path as a user's factory is. Its formulas:
``tests/calibration/data/custom_sd.wf``.
"""

from __future__ import annotations

from calibration.examples.tiny_sd import build, call_kwargs

__all__ = ["build", "call_kwargs"]
