"""Fixtures for the runtime tests: the hand-written Wan artifact of docs/language.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime import FormulaBook, Pipeline, load_formulas

DATA = Path(__file__).parent / "data"
WAN_PATH = DATA / "wan_example.json"


@pytest.fixture(scope="session")
def book() -> FormulaBook:
    return load_formulas(WAN_PATH)


@pytest.fixture(scope="session")
def wan(book: FormulaBook) -> Pipeline:
    return book["wan2_2_t2v_a14b"]


@pytest.fixture
def wan_doc() -> dict[str, Any]:
    """A fresh, mutable copy of the Wan artifact document."""
    return json.loads(WAN_PATH.read_text())
