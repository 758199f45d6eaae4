"""docs/planning.md's Python examples run (those that need a GPU pipeline are shown, not run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "planning.md"
BLOCKS = [
    block
    for block in re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    if "pipe(" not in block  # applying needs a real pipeline: tests/calibration/test_plan_apply.py
]


def test_the_page_has_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_example_runs(block):
    exec(compile(block, str(DOC), "exec"), {})  # noqa: S102  (this repository's own docs)
