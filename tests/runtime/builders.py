"""Small builders for hand-made artifact documents (plain JSON data), shared by the runtime
tests.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

SPAN = {"source": 0, "line": 1, "column": 1, "end_line": 1, "end_column": 2}
SHA = "0" * 64


def I(v: int) -> dict[str, Any]:
    return {"k": "int", "v": v}


def B(v: bool) -> dict[str, Any]:
    return {"k": "bool", "v": v}


def F(n: int, d: int) -> dict[str, Any]:
    return {"k": "frac", "n": n, "d": d}


def P(name: str) -> dict[str, Any]:
    return {"k": "param", "name": name}


def L(name: str) -> dict[str, Any]:
    return {"k": "let", "name": name}


def op(kind: str, *args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"k": kind, "args": list(args), **extra}


def int_param(name: str, default: int, lo: int = 0, hi: int | None = None) -> dict[str, Any]:
    return {"name": name, "type": "int", "default": default, "min": lo, "max": hi, "span": SPAN}


def bool_param(name: str, default: bool) -> dict[str, Any]:
    return {"name": name, "type": "bool", "default": default, "span": SPAN}


def stage(
    name: str,
    iterations: Any = None,
    memory: Any = None,
    time: Any = None,
    memory_terms: list[Any] | None = None,
    time_terms: list[Any] | None = None,
) -> dict[str, Any]:
    """A stage; `memory_terms` lists the terms of `memory ~ [t1, t2, ...]` (memory: their sum),
    `time_terms` those of `time ~ [...]`."""

    def field(expr: Any) -> dict[str, Any]:
        return {"expr": I(1) if expr is None else expr, "span": None if expr is None else SPAN}

    built: dict[str, Any] = {
        "name": name,
        "span": SPAN,
        "iterations": field(iterations),
        "memory": field(
            memory if memory is not None or not memory_terms else left_sum(memory_terms)
        ),
        "time": field(time if time is not None or not time_terms else left_sum(time_terms)),
    }
    if memory_terms is not None:
        built["memory"]["terms"] = [{"expr": t, "span": SPAN} for t in memory_terms]
    if time_terms is not None:
        built["time"]["terms"] = [{"expr": t, "span": SPAN} for t in time_terms]
    return built


def left_sum(terms: list[dict[str, Any]]) -> dict[str, Any]:
    """`add(add(t1, t2), t3)...`: the memory a list of terms must come with."""
    total = terms[0]
    for term in terms[1:]:
        total = op("add", total, term)
    return total


def let(name: str, expr: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "expr": expr, "span": SPAN}


def contract(param: str, text: str, expr: dict[str, Any]) -> dict[str, Any]:
    return {"param": param, "text": text, "expr": expr, "span": SPAN}


def pipeline(
    name: str,
    params: Sequence[Any],
    stages: Sequence[Any],
    lets: Sequence[Any] = (),
    contracts: Sequence[Any] = (),
) -> dict[str, Any]:
    return {
        "name": name,
        "extends": None,
        "span": SPAN,
        "params": list(params),
        "contracts": list(contracts),
        "lets": list(lets),
        "stages": list(stages),
    }


def document(*pipelines: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": "workload-formulas",
        "format_version": 1,
        "compiler": {"name": "dslc", "version": "test"},
        "sources": [{"path": "test.wf", "sha256": SHA}],
        "pipelines": copy.deepcopy(list(pipelines)),
    }


def one_stage(
    iterations: Any = None,
    memory: Any = None,
    time: Any = None,
    params: list[Any] | None = None,
    lets: Sequence[Any] = (),
    contracts: Sequence[Any] = (),
) -> dict[str, Any]:
    """A document with one pipeline `p` and one stage `S`."""
    params = params if params is not None else [int_param("steps", 40, 1, 1000)]
    return document(pipeline("p", params, [stage("S", iterations, memory, time)], lets, contracts))
