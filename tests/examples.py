"""Text examples shared by tests: the contract's own example, read from LANGUAGE.md itself."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANGUAGE_MD = ROOT.parent / "shared" / "LANGUAGE.md"


def _first_code_block(text: str) -> str:
    return text.split("```")[1].split("\n", 1)[1]


LANGUAGE_EXAMPLE = _first_code_block(LANGUAGE_MD.read_text())
