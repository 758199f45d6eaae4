"""Text examples shared by tests: the language's running example, read from docs/language.md."""

from __future__ import annotations

from pathlib import Path

from dslc.compiler import CompileResult
from dslc.model import Program

ROOT = Path(__file__).resolve().parent.parent
LANGUAGE_MD = ROOT / "docs" / "language.md"


def _file_block(text: str, name: str) -> str:
    """The ```wf block that docs/language.md marks `<!-- file: NAME -->`."""
    marker = f"<!-- file: {name} -->\n```wf\n"
    start = text.index(marker) + len(marker)
    return text[start : text.index("```", start)]


LANGUAGE_EXAMPLE = _file_block(LANGUAGE_MD.read_text(), "wan.wf")


def program_of(result: CompileResult) -> Program:
    """The program of a compile that must succeed; the diagnostics otherwise, as the failure."""
    assert result.ok and result.program is not None, [d.message for d in result.diagnostics]
    return result.program
