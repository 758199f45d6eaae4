"""Branch and bound over param ranges: intervals made sharper by proving piece by piece.

`if steps != 3 then 1 / (steps - 3) else 0` cannot be shown from [1, 1000] at once (the divisor's
interval holds 0), but split at the middle again and again it can: every piece either keeps the
divisor away from zero or contradicts the guard (`steps` in [3, 3] with `steps != 3`). Integer
points are exact for polynomials, so a finite range always ends, within the budget or not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction

from dslc import ast
from dslc.passes.intervals import INF, Abstract, Bound, Env, Interval

BUDGET = 96  # pieces evaluated per property
FAR = 64  # how far past its low end an infinite range is first cut


def excludes_zero(value: Abstract) -> bool:
    return isinstance(value, Interval) and (value.lo > 0 or value.hi < 0)


def nonnegative(value: Abstract) -> bool:
    return isinstance(value, Interval) and value.lo >= 0


def _cut(piece: Interval) -> tuple[Interval, Interval] | None:
    lo, hi = piece.lo, piece.hi
    if isinstance(lo, float) or lo == hi:
        return None
    mid = lo + max(Fraction(FAR), abs(lo)) if isinstance(hi, float) else Fraction((lo + hi) // 2)
    return Interval(lo, mid, True), Interval(mid + 1, hi, True)


def _width(piece: Abstract) -> Bound:
    if not isinstance(piece, Interval):
        return Fraction(0)
    if isinstance(piece.lo, float) or isinstance(piece.hi, float):
        return INF
    return piece.hi - piece.lo


def holds_everywhere(
    params: Mapping[str, Abstract],
    constrain: Callable[[Env], Env | None],
    make_env: Callable[[Mapping[str, Abstract]], Env],
    expr: ast.Expr,
    names: list[str],
    good: Callable[[Abstract], bool],
    spend: Callable[[], bool] = lambda: True,
    budget: int = BUDGET,
) -> bool:
    """True when `good` holds of `expr` on every piece of the box `params`, split along `names`;
    `spend` is asked before each piece (False: the caller's budget is gone)."""
    stack = [dict(params)]
    while stack:
        budget -= 1
        if budget < 0 or not spend():
            return False
        piece = stack.pop()
        env = constrain(make_env(piece))
        if env is None:
            continue  # no admissible point in this piece
        if good(env.eval(expr)):
            continue
        widths = [
            (_width(env.params[n]), n) for n in names if isinstance(env.params.get(n), Interval)
        ]
        widths = [w for w in widths if w[0] > 0]
        if not widths:
            return False
        _, name = max(widths)
        halves = _cut(env.params[name])  # type: ignore[arg-type]
        if halves is None:
            return False
        stack += [{**env.params, name: half} for half in reversed(halves)]
    return True
