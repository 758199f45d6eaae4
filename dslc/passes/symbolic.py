"""The prover's last resort: sympy's assumptions, within a size bound and a time budget.

Each int param `x` with lower bound `lo` becomes `lo + x_` for a nonnegative integer symbol `x_`, so
`(steps - 5) * (steps - 5)` is a square of a real and `height - 16` is nonnegative. Bool params are
split case by case. Importing this module imports sympy (about 0.3 s): the prover does so lazily.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

import sympy
from sympy.polys.polyerrors import BasePolynomialError

from dslc import ast
from dslc.limits import PROVER_SECONDS
from dslc.passes.context import Context
from dslc.passes.intervals import Interval
from dslc.passes.obligations import Obligation
from dslc.to_sympy import Lowerer, LowerError

MAX_NODES = 300  # nodes, lets inlined, above which sympy is not tried
MAX_BOOL_SPLIT = 3


class _OutOfTime(BaseException):
    """Raised by the alarm; a BaseException so that no `except Exception` inside sympy swallows
    it.
    """


@contextlib.contextmanager
def _budget(seconds: float) -> Iterator[None]:
    """Abort the body after `seconds` (only in the main thread, where signals can be used)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    started = time.monotonic()
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:  # someone else's alarm (a test timeout): put it back, a little late at worst
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))


def _target(ob: Obligation) -> ast.Expr:
    """What must hold: a division's divisor, else the whole expression."""
    if ob.kind == "divisor":
        assert isinstance(ob.node, ast.Binary), "a divisor obligation's node is its division"
        return ob.node.right
    return ob.expr


def prove_symbolically(ctx: Context, ob: Obligation) -> bool:
    """True when sympy shows the obligation holds everywhere in its params' ranges."""
    target = _target(ob)
    if ctx.size(target) > MAX_NODES:
        return False
    try:
        with _budget(PROVER_SECONDS):
            return _prove(ctx, ob.kind, target, ctx.box if ob.contract is not None else ctx.domains)
    except _OutOfTime:
        return False
    except (
        LowerError,
        BasePolynomialError,
        RuntimeError,
        ArithmeticError,
        TypeError,
        ValueError,
        AttributeError,
        LookupError,
    ):  # sympy gave up in its own way (RecursionError too): not proved
        return False


def _prove(ctx: Context, kind: str, target: ast.Expr, domains: dict) -> bool:
    symbols: dict[str, sympy.Basic] = {}
    bools = []
    for name in ctx.ordered(ctx.deps(target)):
        if ctx.param_types[name] == "bool":
            bools.append(name)
            continue
        domain = domains[name]
        lo = (
            domain.lo if isinstance(domain, Interval) and not isinstance(domain.lo, float) else None
        )
        if lo is None:
            symbols[name] = sympy.Symbol(name + "_", integer=True)
        else:
            symbols[name] = sympy.Rational(lo) + sympy.Symbol(
                name + "_", integer=True, nonnegative=True
            )
    if len(bools) > MAX_BOOL_SPLIT:
        return False
    for case in itertools.product((sympy.true, sympy.false), repeat=len(bools)):
        env = {**symbols, **dict(zip(bools, case))}
        value = Lowerer(ctx.pipeline, env).lower(target)
        if isinstance(value, tuple) or not _holds(kind, value):
            return False
    return True


def _holds(kind: str, value: sympy.Basic) -> bool:
    if kind == "divisor":
        return value.is_zero is False
    if kind == "integer":
        return value.is_integer is True
    if value.is_nonnegative is True:
        return True
    if value.has(sympy.Piecewise, sympy.floor, sympy.ceiling, sympy.Mod, sympy.Min, sympy.Max):
        return False
    return sympy.factor(value).is_nonnegative is True
