"""Every function in calibration/ fits on a screen (issue 32: none over 60 lines): a longer one
is a loop of named steps waiting to be written."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MOST_LINES = 60


def long_functions(package: Path) -> list[str]:
    """``path:line name (N lines)`` for each function of ``package`` over ``MOST_LINES``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MOST_LINES:
                    found.append(f"{path.relative_to(package)}:{node.lineno} {node.name} ({lines})")
    return found


def test_no_function_in_calibration_is_over_60_lines() -> None:
    assert long_functions(ROOT / "calibration") == []


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MOST_LINES))
    (tmp_path / "m.py").write_text(f"def f():\n{body}\n\ndef g():\n    pass\n", encoding="utf-8")
    assert long_functions(tmp_path) == [f"m.py:1 f ({MOST_LINES + 1})"]
