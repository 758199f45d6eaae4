"""Work budgets for tests: Python calls counted, so a bound holds however loaded the machine is.

Wall-clock limits belong in bench/; a test bounds the work instead. `sys.setprofile` sees every
Python-level call on this thread, so a budget linear in the input's size fails on any quadratic
(or worse) path while a slow, shared CI machine cannot make it fail.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

T = TypeVar("T")


def count_calls(work: Callable[[], T]) -> tuple[T, int]:
    """Run `work` and count the Python function calls it made (C calls are not counted)."""
    calls = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = work()
    finally:
        sys.setprofile(previous)
    return result, calls


def within_linear_budget(work: Callable[[], T], size: int, per_unit: int = 50) -> T:
    """Run `work`, failing if it makes more than `per_unit` calls per input unit (plus 10,000)."""
    result, calls = count_calls(work)
    budget = per_unit * size + 10_000
    assert calls <= budget, f"{calls} Python calls for an input of {size}: budget {budget}"
    return result
