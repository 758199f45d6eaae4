"""bench/serve_load.py's figures from a loopback run, and one example's whole load test."""

from __future__ import annotations

from attrs import frozen

from bench.serve_load_core import (
    EXAMPLE_SETUPS,
    FAULTS,
    Faulting,
    Figures,
    Got,
    Kind,
    Served,
    booted,
    make_trace,
    serve_over_http,
)
from bench.serve_load_policies import PolicyRow, policies


def _message(got: Got) -> str:
    error = got.doc.get("error")
    return str(error.get("message", "")) if isinstance(error, dict) else ""


def names_limit(got: Got) -> bool:
    """A 4xx whose message names what limits the request: a param it set, the largest values
    admitted (a too-large request lists them per axis), or the queue's size."""
    message = _message(got)
    named = any(str(name) in message for name in got.item.body)
    assert got.status is not None
    return 400 <= got.status < 500 and (named or "largest" in message or "queue" in message)


def _fault_answered(got: Got) -> bool:
    """A fault request answered 500 naming what failed (an out-of-memory error as one)."""
    message = _message(got)
    said = "out of memory" if got.item.kind is Kind.OOM else "failed"
    return got.status == 500 and said in message


def figures_of(worker: Faulting, served: Served) -> Figures:
    """The figures of one loopback run (``Figures``)."""
    usable = worker.inner.inner.device.usable_bytes
    answered = [g for g in served.got if g.status is not None]
    lost = sum(1 for g in served.got if g.status is None and not g.gone)
    lost += (not served.healthy_after) + (not served.served_after)
    faults = [g for g in answered if g.item.kind in FAULTS]
    others = [g for g in answered if g.item.kind not in FAULTS and g.status != 200]
    refusals = [g for g in others if g.status != 500]
    wrong_fault = sum(not _fault_answered(g) for g in faults) + len(others) - len(refusals)
    seen = worker.seen
    oom = sum(1 for s in seen if s.fault is None and (s.out_of_memory or (s.peak or 0) > usable))
    back = [s for s in seen if s.after_failure is not None]
    not_back = sum(s.after_failure != worker.baseline or s.before != worker.baseline for s in back)
    return Figures(
        oom_admitted=oom,
        lost_or_hung=lost,
        refusals=len(refusals),
        refusals_wrong=sum(not names_limit(g) for g in refusals),
        failures_wrong=wrong_fault,
        peak_bytes=max((s.peak or 0 for s in seen), default=0),
        usable_bytes=usable,
        not_back=not_back,
    )


@frozen
class Result:
    """One example's load test: its figures and the policies side by side."""

    figures: Figures
    policies: list[PolicyRow]
    served: Served


def load_test(example: str, requests: int, seed: int, clients: int) -> Result:
    """Boot ``example``, serve the trace over loopback HTTP, then the policies on the same trace."""
    setup = EXAMPLE_SETUPS[example]
    worker = booted(example, setup)
    try:
        trace = make_trace(seed, requests, setup.target)
        served = serve_over_http(worker, trace, clients)
        figures = figures_of(worker, served)
        rows = policies(worker.inner, [item.body for item in trace], setup.probe)
    finally:
        worker.inner.close()
    return Result(figures, rows, served)
