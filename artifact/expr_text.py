"""A declared expression as the formula file would write it, for messages that name a term
(``tokens * tokens``): params, lets, numbers and arithmetic; None for anything else (an ``if``, a
comparison) or past ``LONGEST`` characters, so a caller names it otherwise."""

from __future__ import annotations

from collections.abc import Sequence

from artifact.ir import Expr

#: The longest text a message quotes: a term past it is named otherwise.
LONGEST = 120

_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%"}
_BINDS = {"add": 1, "sub": 1, "mul": 2, "div": 2, "floordiv": 2, "mod": 2}
_ATOM = 4


def expr_text(expr: Expr, params: Sequence[str], lets: Sequence[str]) -> str | None:
    """``expr`` as text (``params`` and ``lets`` name its references), or None (see the module)."""
    shown = _text(expr, params, lets)
    if shown is None or len(shown[0]) > LONGEST:
        return None
    return shown[0]


def _text(expr: Expr, params: Sequence[str], lets: Sequence[str]) -> tuple[str, int] | None:
    """The text and how tightly it binds (``_BINDS``; atoms and calls ``_ATOM``)."""
    kind = expr.kind
    if kind in ("param", "let") and expr.ref is not None:
        return (params if kind == "param" else lets)[expr.ref], _ATOM
    if kind == "int" and isinstance(expr.value, int) and expr.value >= 0:
        return str(expr.value), _ATOM
    parts = [_text(a, params, lets) for a in expr.args]
    if any(p is None for p in parts) or len(str(parts)) > 4 * LONGEST:
        return None
    shown = [p for p in parts if p is not None]
    if kind in ("min", "max"):
        return f"{kind}({', '.join(t for t, _ in shown)})", _ATOM
    if kind == "pow" and len(shown) == 1 and expr.exp is not None:
        base, binds = shown[0]
        return f"{base if binds == _ATOM else f'({base})'} ** {expr.exp}", 3
    if kind in _SYMBOL and len(shown) == 2:
        binds = _BINDS[kind]
        (left, lb), (right, rb) = shown
        left = left if lb >= binds else f"({left})"
        # the right operand of a non-commutative operator binds tighter: a - (b - c)
        tight = binds + (0 if kind in ("add", "mul") else 1)
        right = right if rb >= tight else f"({right})"
        return f"{left} {_SYMBOL[kind]} {right}", binds
    return None
