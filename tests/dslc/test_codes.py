"""docs/language.md's table of diagnostic codes is what `dslc.codes.Code` renders, so they agree.

Regenerate the table after changing the enum with `UPDATE_DOCS=1 pytest tests/dslc/test_codes.py`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dslc.codes import Code, docs_table

PAGE = Path(__file__).resolve().parents[2] / "docs" / "language.md"
TABLE = re.compile(r"^\| code \| meaning \|\n(?:^\|.*\|\n)+", re.MULTILINE)


def table_in(text: str) -> str:
    """The one table of codes on the page."""
    found = TABLE.findall(text)
    assert len(found) == 1, f"{len(found)} tables of codes in {PAGE.name}"
    return found[0]


def test_the_docs_table_is_rendered_from_the_enum() -> None:
    text = PAGE.read_text()
    if os.environ.get("UPDATE_DOCS"):
        PAGE.write_text(text.replace(table_in(text), docs_table()))
        text = PAGE.read_text()
    assert table_in(text) == docs_table()


def test_a_changed_description_would_show() -> None:
    edited = PAGE.read_text().replace(Code.CYCLE.description, "lets that loop")
    assert table_in(edited) != docs_table()


def test_every_code_prints_its_value_and_has_one_line() -> None:
    assert [str(code) for code in Code][:3] == ["syntax", "undefined-name", "duplicate"]
    assert len(Code) == 11 and all(c.description and "\n" not in c.description for c in Code)
    assert f"error[{Code.DIVISION_BY_ZERO}]" == "error[division-by-zero]"
