"""Shared fixtures for the calibration tests: formulas compiled from the repository's own files."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

FORMULAS = Path(__file__).resolve().parents[2] / "formulas"


@pytest.fixture(scope="session")
def wan():
    """formulas/wan.wf's Wan 2.1 T2V 14B: steps, frames (% 4 == 1), height and width (% 16 ==
    0), cfg.
    """
    from calibration.calibrate.run import load_pipeline

    return load_pipeline(FORMULAS / "wan.wf", "wan2_1_t2v_14b")


@pytest.fixture(scope="session")
def wan_1_3b():
    """formulas/wan.wf's Wan 2.1 T2V 1.3B: the tiny Wan example's formulas."""
    from calibration.calibrate.run import load_pipeline

    return load_pipeline(FORMULAS / "wan.wf", "wan2_1_t2v_1_3b")


@pytest.fixture(scope="session")
def flux():
    """formulas/flux.wf's FLUX.1 [dev]: height and width, no frames."""
    from calibration.calibrate.run import load_pipeline

    return load_pipeline(FORMULAS / "flux.wf", "flux1_dev")


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    """One intra-op thread: the 2-core test machine is shared; oversubscription makes runs
    erratic.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
