"""The fitting core's exact least squares: in integers (``runtime.estimate.fit.integer``, what the
subset search and leave-one-out use) against ``Fraction`` (``exact.least_squares``), side by side
on the same systems, CPU time per fit.

One system: ``sizes`` measured sizes (float values, as records give them), ``terms`` integer term
columns, every size fitted; a fit is solving it and computing every residual. The search row runs
``subset_search`` over 24 candidate columns, up to 3 terms, with no set fitting (every set tried:
2,325 of them), against the same sets fitted in ``Fraction`` one by one.

    .venv/bin/python bench/fit_core.py
"""

from __future__ import annotations

import functools
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime.estimate.fit.exact import dot, least_squares, rank, row
from runtime.estimate.fit.integer import IntegerColumn, integer_least_squares
from runtime.estimate.fit.search import candidate_sets, subset_search


def _system(
    rng: random.Random, sizes: int, terms: int
) -> tuple[list[list[Fraction]], list[Fraction]]:
    columns = [[Fraction(rng.randint(1, 4096) * rng.choice([1, 16, 81])) for _ in range(sizes)]]
    columns += [[Fraction(rng.randint(1, 10**6)) for _ in range(sizes)] for _ in range(terms - 1)]
    values = [Fraction(rng.uniform(1e5, 4e10)) for _ in range(sizes)]
    return columns, values


def _fraction_fit(columns: list[list[Fraction]], values: list[Fraction]) -> list[Fraction] | None:
    rows = [row([c[i] for c in columns]) for i in range(len(values))]
    if rank(rows) < len(columns) + 1:
        return None
    solved = least_squares(rows, values)
    assert solved is not None
    return [v - dot(solved[0], r) for r, v in zip(rows, values)]


def _integer_fit(columns: list[list[Fraction]], values: list[Fraction]) -> list[Fraction] | None:
    solved = integer_least_squares(
        [IntegerColumn.of(c) for c in columns], IntegerColumn.of(values), range(len(values))
    )
    return None if solved is None else list(solved.residuals)


def _cpu(run: Callable[[], object], rounds: int) -> float:
    start = time.process_time()
    for _ in range(rounds):
        run()
    return (time.process_time() - start) / rounds


def _search_rows(rng: random.Random) -> tuple[float, float, int]:
    columns, values = _system(rng, 24, 24)
    zero = [Fraction(0)] * len(values)
    sets = list(candidate_sets([list(range(24))], 0, 3))
    start = time.process_time()
    found = subset_search([list(range(24))], lambda m: columns[m], values, zero, most=3)
    integer = time.process_time() - start
    start = time.process_time()
    for chosen in sets:
        _fraction_fit([columns[m] for m in chosen], values)
    fraction = time.process_time() - start
    return fraction, integer, found.tried


def main() -> int:
    rng = random.Random(0)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, CPython "
        f"{platform.python_version()}; CPU time per fit (all residuals included)"
    )
    print(f"{'sizes':>6}{'terms':>6}{'Fraction ms':>13}{'integer ms':>12}{'ratio':>8}")
    for sizes in (8, 24, 48):
        for terms in (1, 2, 3):
            columns, values = _system(rng, sizes, terms)
            rounds = max(5, 600 // sizes)
            a = _cpu(functools.partial(_fraction_fit, columns, values), rounds)
            b = _cpu(functools.partial(_integer_fit, columns, values), rounds)
            assert _fraction_fit(columns, values) == _integer_fit(columns, values)
            print(f"{sizes:>6}{terms:>6}{a * 1e3:>13.3f}{b * 1e3:>12.3f}{a / b:>7.1f}x")
    fraction, integer, tried = _search_rows(rng)
    print(
        f"search: {tried} sets of up to 3 of 24 terms over 24 sizes: Fraction {fraction:.2f} s, "
        f"subset_search {integer:.2f} s, {fraction / integer:.1f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
