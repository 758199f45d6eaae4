"""Shared fixtures for the measuring tests: the real formula loader over a hand-written artifact."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from runtime import load_formulas

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def book():
    """The hand-written artifact (see data/wan_tiny.wf for its source), loaded by the real
    loader.
    """
    return load_formulas(DATA / "wan_tiny.json")


@pytest.fixture(scope="session")
def wan(book):
    """The Wan 2.1 formulas: steps, frames (% 4 == 1), height and width (% 16 == 0), cfg."""
    return book["wan2_1_t2v_14b"]


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    """One intra-op thread: the 2-core test machine is shared, and oversubscription makes CPU runs
    erratic.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
