"""The static cost model: how large a value may grow and how much work evaluating it takes.

Defined once, here, and used by the loader (artifact/tree_checks.py, on every node it validates)
and by the compiler (which validates what it would emit the same way), so both refuse the same
programs.

Every numeric node gets a bound on its value over the declared param ranges: `bits` for the
numerator and `dbits` for the denominator (0 for an integer), in the style of CEL's cost estimator:

- literals: their own bit lengths; an int param: its range's larger end (`inf`: UNBOUNDED_BITS);
- `a + b`: one bit more than the larger (for fractions `(n1 d2 + n2 d1) / (d1 d2)`);
- `a * b`: the bit lengths add; `a / b`: `n1 d2 / (d1 n2)`; `a ** e`: they multiply by `e`;
- `min`, `max`, `if`: the larger of their args; `floor`, `ceil`, `a // b`: integers one bit longer
  than the quotient; `a % b`: no longer than `b`;
- booleans are one bit.

Work counts 64-bit word operations: linear for sums, Karatsuba for products and powers, quadratic
in the words of big operands for quotients and fractions (as CPython's division and gcd are); a
node's `work` is its own plus its args' (for `if`: the condition and the costlier
branch, since only the taken branch runs).
"""

from __future__ import annotations

from artifact.ir import Expr
from artifact.limits import UNBOUNDED_BITS

__all__ = ["leaf_bits", "node_bounds", "param_bits"]

_QUOTIENT = frozenset({"floordiv", "mod", "div"})


def leaf_bits(value: int) -> int:
    """The bit length of an integer's magnitude."""
    return (value if value >= 0 else -value).bit_length()


def param_bits(low: int | None, high: int | None, is_bool: bool) -> int:
    """A param's bound: one bit for a bool, else its range's larger end (`inf`: UNBOUNDED_BITS)."""
    if is_bool or low is None:
        return 1
    if high is None:
        return max(UNBOUNDED_BITS, leaf_bits(low))
    return max(leaf_bits(low), leaf_bits(high))


def _words(bits: int) -> int:
    return (bits >> 6) + 1


def node_bounds(kind: str, args: tuple[Expr, ...], exp: int | None) -> tuple[int, int, int]:
    """`(bits, dbits, work)` of a compound node from its validated args' bounds."""
    if kind in ("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not"):
        bits, dbits = 1, 0
    elif kind in ("neg", "abs"):
        bits, dbits = args[0].bits, args[0].dbits
    elif kind in ("floor", "ceil"):
        bits, dbits = args[0].bits + 1, 0
    elif kind in ("add", "sub"):
        a, b = args
        bits, dbits = max(a.bits + b.dbits, b.bits + a.dbits) + 1, a.dbits + b.dbits
    elif kind == "mul":
        a, b = args
        bits, dbits = a.bits + b.bits, a.dbits + b.dbits
    elif kind == "div":
        a, b = args
        bits, dbits = a.bits + b.dbits, a.dbits + b.bits
    elif kind == "floordiv":
        a, b = args
        bits, dbits = a.bits + b.dbits + 1, 0
    elif kind == "mod":
        a, b = args
        bits, dbits = b.bits + a.dbits + b.dbits, a.dbits + b.dbits
    elif kind == "pow":
        assert exp is not None
        bits, dbits = (args[0].bits * exp, args[0].dbits * exp) if exp else (1, 0)
    else:  # min, max, if: the larger of the values it may take
        values = args[1:] if kind == "if" else args
        bits, dbits = max(a.bits for a in values), max(a.dbits for a in values)
    return bits, dbits, _own_work(kind, args, bits, dbits) + _args_work(kind, args)


def _own_work(kind: str, args: tuple[Expr, ...], bits: int, dbits: int) -> int:
    """Word operations of the node itself: linear for int sums and comparisons, Karatsuba for
    products and powers, quadratic for quotients and anything on fractions (each takes a gcd)."""
    if kind in ("and", "or", "not", "if"):
        return 1
    if kind == "pow":
        return 1 + 2 * _karatsuba(_words(bits)) + (2 * _karatsuba(_words(dbits)) if dbits else 0)
    sizes = [_words(a.bits) + (_words(a.dbits) if a.dbits else 0) for a in args]
    if kind == "mul" and not any(a.dbits for a in args):
        return 1 + _product(sizes[0], sizes[1])
    if kind in _QUOTIENT or kind == "mul" or any(a.dbits for a in args):
        if len(args) == 2:
            return 1 + (sizes[0] + 1) * (sizes[1] + 1)
        return 1 + (max(sizes) + 1) * sum(s + 1 for s in sizes)
    return 1 + sum(sizes)


def _karatsuba(words: int) -> int:
    """Word operations of squaring a `words`-word integer: schoolbook up to 32 words (CPython's
    cut-over is 70 30-bit digits), then three half-size products per halving."""
    if words <= 32:
        return words * words
    halvings: int = 3 ** ((words - 1) >> 5).bit_length()  # typeshed: int ** int may be a float
    return 1024 * halvings


def _product(a: int, b: int) -> int:
    """Word operations of multiplying an `a`-word by a `b`-word integer (CPython slices the
    longer one into pieces the size of the shorter)."""
    small, big = min(a, b), max(a, b)
    if small <= 32:
        return small * big
    return (big // small + 1) * _karatsuba(small)


def _args_work(kind: str, args: tuple[Expr, ...]) -> int:
    """The args' work: all of them, except that `if` runs only one branch."""
    if kind == "if":
        return args[0].work + max(args[1].work, args[2].work)
    return sum(a.work for a in args)
