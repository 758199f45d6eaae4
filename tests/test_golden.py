"""Golden diagnostics: every `tests/golden/**/*.wf` renders exactly its `.expected` file.

Regenerate (then review every change by eye) with `UPDATE_GOLDEN=1 pytest tests/test_golden.py`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dslc.compiler import compile_paths
from dslc.diagnostics import render

ROOT = Path(__file__).resolve().parent.parent
CASES = sorted((ROOT / "tests" / "golden").rglob("*.wf"))


def rendered(case: Path) -> str:
    relative = case.relative_to(ROOT).as_posix()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        result = compile_paths([relative])
    finally:
        os.chdir(cwd)
    return "\n\n".join(render(d) for d in result.diagnostics) + "\n"


def test_there_are_golden_cases_for_every_code() -> None:
    text = "".join(
        p.with_suffix(".expected").read_text() for p in CASES if p.with_suffix(".expected").exists()
    )
    for code in ("syntax", "undefined-name", "duplicate", "cycle", "type", "domain", "limit"):
        assert text.count(f"error[{code}]") >= 3, code


@pytest.mark.parametrize(
    "case", CASES, ids=[c.relative_to(ROOT / "tests" / "golden").as_posix() for c in CASES]
)
def test_golden(case: Path) -> None:
    expected_file = case.with_suffix(".expected")
    actual = rendered(case)
    if os.environ.get("UPDATE_GOLDEN"):
        expected_file.write_text(actual)
    assert expected_file.exists(), (
        f"missing {expected_file}; run with UPDATE_GOLDEN=1 and review it"
    )
    assert actual == expected_file.read_text()
