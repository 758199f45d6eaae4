"""bench/serve_load.py's core on a dozen requests of the tiny FLUX: a real uvicorn on 127.0.0.1,
faults injected mid-denoise, clients that hang up; every figure holds, and exact admission runs
nothing out of memory where the largest shape's plan without admission does. The SIGTERM part
(`dslc serve` in a process of its own) is test_real_server.py's."""

from __future__ import annotations

import pytest

from bench.serve_load_core import EXAMPLE_SETUPS, FAULTS, Kind, make_trace
from bench.serve_load_run import load_test

pytest.importorskip("uvicorn")
TARGET = EXAMPLE_SETUPS["flux"].target


def test_the_trace_is_seeded_and_holds_every_kind():
    trace = make_trace(3, 12, TARGET)
    assert trace == make_trace(3, 12, TARGET)
    assert {item.kind for item in trace} == set(Kind)
    marked = {int(i.body["steps"]) for i in trace if i.kind in FAULTS}  # type: ignore[call-overload]
    others = {i.body.get("steps") for i in trace if i.kind not in FAULTS}
    assert marked and not marked & others  # a fault's shape is its own


@pytest.mark.slow
def test_under_load_every_figure_holds():
    result = load_test("flux", 12, seed=0, clients=3)
    figures = result.figures
    assert figures.hold, figures.rows()
    kinds = {g.item.kind for g in result.served.got}
    assert kinds == set(Kind)
    assert figures.refusals >= 2  # the huge and the inadmissible ones, each a 4xx naming the limit
    assert sum(g.gone for g in result.served.got) >= 1  # a client hung up mid-request
    by_policy = {row.policy: row for row in result.policies}
    assert by_policy["admission"].oom == 0
    assert by_policy["largest plan, no admission"].oom > 0
