"""The prover's budget: formulas that make naive sympy work for seconds are settled (or left
`unproven`); no formula keeps the compiler busy. The budget is in seconds by design (sympy's cost is
not otherwise boundable), so these tests check the outcome and bench/compile.py the time.
"""

from __future__ import annotations

from dslc.compiler import compile_text

# Non-negative, but not by intervals (subtractions) and not cheaply by sympy: a naive
# `sympy.expand(...).is_nonnegative` on the memory formula takes ~3 s here and proves nothing.
HARD = """pipeline hard {
    param a: int = 1 in [0, 10 ** 6]
    param b: int = 1 in [0, 10 ** 6]
    param c: int = 1 in [0, 10 ** 6]
    param d: int = 1 in [0, 10 ** 6]
    stage S {
        memory ~ ((a ** 4 - 2 * a ** 2 * b + b ** 2) * (c ** 4 - 2 * c ** 2 * d + d ** 2)
            * (a + b + c + d) ** 20)
        time ~ (a * a - 2 * b * b + c * d - a * d) ** 2 * (a * b - c * c + 7 * a * b * c - 3) ** 6
    }
}
"""


def test_explosive_formulas_stay_within_the_budget() -> None:
    result = compile_text(HARD, "hard.wf")
    assert not result.errors, [d.message for d in result.errors]
    assert {d.code for d in result.diagnostics} <= {"unproven"}


def test_many_hard_pipelines_do_not_add_up_to_minutes() -> None:
    text = "\n".join(HARD.replace("pipeline hard", f"pipeline hard_{i}") for i in range(5))
    result = compile_text(text, "hard5.wf")
    assert not result.errors
    assert result.program is not None and len(result.program.pipelines) == 5
