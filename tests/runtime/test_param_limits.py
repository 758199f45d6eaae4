"""Request values stay within what the loader's cost model assumed (artifact/cost.py).

A param ranging to `inf` is counted as UNBOUNDED_BITS bits (about 4,300 digits); every entry point
that takes params refuses a larger value with ParamLimitError, and no contract ever sees a value
beyond its param's bound (an out-of-range one is only reported as out of range).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from artifact.limits import UNBOUNDED_BITS
from runtime import (
    InadmissibleError,
    ParamError,
    ParamLimitError,
    Pipeline,
    load_formulas,
)

from .builders import I, P, contract, document, int_param, op, pipeline, stage

LIMIT = 1 << UNBOUNDED_BITS  # the first value refused
EVEN = contract("n", "n % 2 == 0", op("eq", op("mod", P("n"), I(2)), I(0)))


def unbounded() -> Pipeline:
    """`n` in [0, inf] (even), `m` in [0, 100]; `S` has memory n ** 2 and time terms [n, m]."""
    params = [int_param("n", 2, 0, None), int_param("m", 3, 0, 100)]
    doc = document(
        pipeline(
            "p",
            params,
            [stage("S", memory=op("pow", P("n"), exp=2), time_terms=[P("n"), P("m")])],
            contracts=[EVEN],
        )
    )
    doc["pipelines"][0]["calls"] = [
        {"arg": "n", "expr": P("n"), "span": doc["pipelines"][0]["span"]}
    ]
    return load_formulas(doc)["p"]


ENTRIES: dict[str, Callable[[Pipeline, int], object]] = {
    "iterations": lambda p, v: p.iterations("S", n=v),
    "memory": lambda p, v: p.memory("S", n=v),
    "time": lambda p, v: p.time("S", n=v),
    "reference memory": lambda p, v: Pipeline.memory(p, "S", n=v),
    "memory_terms": lambda p, v: p.memory_terms("S", n=v),
    "time_terms": lambda p, v: p.time_terms("S", n=v),
    "evaluate": lambda p, v: p.evaluate(n=v),
    "call_arguments": lambda p, v: p.call_arguments(n=v),
    "stage_iterations": lambda p, v: p.stage_iterations(probe={"n": v}),
    "stage_iterations target": lambda p, v: p.stage_iterations({}, target={"n": v}),
    "is_admissible": lambda p, v: p.is_admissible(n=v),
    "violations": lambda p, v: p.violations(n=v),
    "largest_admissible": lambda p, v: p.largest_admissible("m", 50, n=v),
}


@pytest.mark.parametrize("entry", ENTRIES)
def test_every_entry_point_refuses_a_value_beyond_the_cost_model(entry: str) -> None:
    p = unbounded()
    for value in (LIMIT, LIMIT + 2, 10**5000):
        with pytest.raises(ParamLimitError) as caught:
            ENTRIES[entry](p, value)
        error = caught.value
        assert isinstance(error, ParamError) and isinstance(error, ValueError)
        assert (error.pipeline, error.param, error.limit_bits) == ("p", "n", UNBOUNDED_BITS)
        assert error.bits == value.bit_length()
        assert f"2**{UNBOUNDED_BITS:,}" in str(error) and "'n'" in str(error)


@pytest.mark.parametrize("entry", ENTRIES)
def test_the_largest_value_the_model_assumed_is_accepted(entry: str) -> None:
    p = unbounded()
    ENTRIES[entry](p, LIMIT - 2)  # even, so admissible: no error
    assert p.memory("S", n=LIMIT - 2) == (LIMIT - 2) ** 2
    assert p.is_admissible(n=LIMIT - 2) and not p.is_admissible(n=LIMIT - 1)


def test_largest_admissible_searches_below_the_limit() -> None:
    p = unbounded()
    assert p.largest_admissible("n", LIMIT * 8) == LIMIT - 2
    assert p.largest_admissible("n", at_most=10**6000) == LIMIT - 2
    assert p.largest_admissible("n", 11) == 10


def test_contracts_never_see_a_value_beyond_its_params_bound() -> None:
    """An out-of-range value far beyond a bounded param's bits is reported as out of range only;
    one within the bits is also checked against the contracts (as before)."""
    doc = document(
        pipeline("q", [int_param("n", 2, 0, 100)], [stage("S", memory=P("n"))], contracts=[EVEN])
    )
    q = load_formulas(doc)["q"]
    huge = 10**5000 + 1  # odd: a contract evaluated at it would be violated too
    assert q.violations(n=huge) == (
        f"n = <an integer of {huge.bit_length():,} bits> is outside [0, 100]",
    )
    assert q.violations(n=101) == ("n = 101 is outside [0, 100]", "n = 101 violates `n % 2 == 0`")
    assert not q.is_admissible(n=huge)
    with pytest.raises(InadmissibleError) as caught:
        q.memory("S", n=huge)
    assert caught.value.params == ("n",)
    with pytest.raises(InadmissibleError):
        q.memory("S", n=-huge)


def test_the_fast_entry_and_the_reference_agree_at_the_edge() -> None:
    p = unbounded()
    results: list[Any] = []
    for call in (p.memory, lambda s, **kw: Pipeline.memory(p, s, **kw)):
        for value in (LIMIT - 2, LIMIT):
            try:
                results.append(call("S", n=value))
            except ParamLimitError as error:
                results.append(("refused", error.param, error.bits))
    assert results[:2] == results[2:]
    assert results[1] == ("refused", "n", UNBOUNDED_BITS + 1)
