"""Text examples shared by tests: the contract's own example, read from LANGUAGE.md itself."""

from __future__ import annotations

from pathlib import Path

from dslc.compiler import CompileResult
from dslc.model import Program

ROOT = Path(__file__).resolve().parent.parent
LANGUAGE_MD = ROOT.parent / "shared" / "LANGUAGE.md"


def _first_code_block(text: str) -> str:
    return text.split("```")[1].split("\n", 1)[1]


LANGUAGE_EXAMPLE = _first_code_block(LANGUAGE_MD.read_text())


def program_of(result: CompileResult) -> Program:
    """The program of a compile that must succeed; the diagnostics otherwise, as the failure."""
    assert result.ok and result.program is not None, [d.message for d in result.diagnostics]
    return result.program
