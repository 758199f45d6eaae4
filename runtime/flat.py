"""Every stage's measures at one point as one flat tuple: where each stage's lie, and the check
that accepts the common case in a few C calls (a serving worker evaluates every request).

The tuple is the head of the generated ``every`` closure's: each stage's iterations, memory and
time (three per stage, in stage order), then each stage's memory terms (stage by stage). Its time
terms follow in ``every`` and are left out: nothing checks them here.
"""

from __future__ import annotations

from fractions import Fraction

from artifact.ir import PipelineDecl

__all__ = ["Slots", "measured_count", "plain", "slots"]

_INT = frozenset({int})
_EXACT = frozenset({int, Fraction})


class Slots:
    """Where one stage's measures lie in the flat tuple (a plain class: ``typing`` stays out of the
    serving worker's imports, tests/runtime/test_import.py)."""

    __slots__ = ("iterations", "listed", "memory", "terms", "time")

    def __init__(self, iterations: int, memory: int, time: int, terms: slice, listed: int) -> None:
        self.iterations = iterations
        self.memory = memory
        self.time = time
        self.terms = terms  # its memory terms: ``memory_terms`` at the point (one: ``(memory,)``)
        self.listed = listed  # how many memory terms the formulas list (0: one, the memory itself)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Slots) and self._key() == other._key()

    def __repr__(self) -> str:
        return f"Slots{self._key()!r}"

    def _key(self) -> tuple[int, int, int, slice, int]:
        return (self.iterations, self.memory, self.time, self.terms, self.listed)


def slots(decl: PipelineDecl) -> dict[str, Slots]:
    """Each stage's slots, by stage name."""
    out = {}
    start = 3 * len(decl.stages)
    for s, stage in enumerate(decl.stages):
        count = len(stage.memory_terms)
        terms = slice(start, start + count) if count else slice(3 * s + 1, 3 * s + 2)
        out[stage.name] = Slots(3 * s, 3 * s + 1, 3 * s + 2, terms, count)
        start += count
    return out


def measured_count(decl: PipelineDecl) -> int:
    """The flat tuple's length: three fields per stage, then every memory term."""
    return 3 * len(decl.stages) + sum(len(st.memory_terms) for st in decl.stages)


def plain(head: tuple[object, ...], stages: int) -> bool:
    """Whether every value is a non-negative int or Fraction and every iteration count an int:
    the values `evaluate` and `memory_terms` accept, checked without a Python loop (anything else
    takes the checked path that names the culprit)."""
    kinds = set(map(type, head))
    if kinds != _INT and (not kinds <= _EXACT or set(map(type, head[0 : 3 * stages : 3])) != _INT):
        return False
    least: int | Fraction = min(head, default=0)  # type: ignore[type-var, assignment]
    return least >= 0
