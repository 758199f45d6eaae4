"""Every fenced example in README.md and docs/*.md runs, and what a page shows is what happens.

The conventions are in tests/docs_runner.py's docstring.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_runner import ROOT, blocks, output_matches, pages, run_page


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_shows_what_happens(page: Path, tmp_path: Path) -> None:
    failures = run_page(page, tmp_path)
    assert not failures, "\n\n".join(failures)


def test_every_page_is_covered() -> None:
    names = {p.name for p in pages()}
    assert names >= {"README.md", "language.md", "cli.md", "runtime.md", "tutorial.md"}


def test_a_changed_output_in_a_copy_of_a_page_fails(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "language.md").read_text()
    assert "ok: 4 pipelines in 1 file" in page
    broken = tmp_path / "language.md"
    broken.write_text(page.replace("ok: 4 pipelines in 1 file", "ok: 5 pipelines in 1 file"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    failures = run_page(broken, scratch)
    assert len(failures) == 1 and "ok: 5 pipelines" in failures[0], failures


def test_a_changed_python_value_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = [1, 2]\nlen(x)  # -> 2\nx  # -> [1, ...]\nsum(x)  # -> 4\n```\n"
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert run_page(page, scratch) == ["page.md:5: shows 4 but the value is 3"]


def test_markers_and_wildcards() -> None:
    text = "<!-- not run: needs a GPU -->\n```console\n$ dslc x\n```\n\n```python\n1\n```\n"
    found = list(blocks(text))
    assert [(b.lang, b.skip, b.line) for b in found] == [
        ("console", "needs a GPU", 3),
        ("python", None, 7),
    ]
    assert output_matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert output_matches(["a ... z"], ["a b c z"])
    assert not output_matches(["a", "z"], ["a", "b", "z"])
