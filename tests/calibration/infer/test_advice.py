"""Advice never asks for a term the formula already has: a stage whose declared memory terms vary
along a direction, off the measured sizes along it, is told to revise them, not to add one (a
draft with a term in steps was once told "add a term in steps")."""

from __future__ import annotations

import pytest

from calibration.probes.findings import check
from tests.runtime.estimate.conftest import record, stage

TARGET = {"steps": 50, "size": 1000}
POINTS = [{"steps": s, "size": z} for s in (1, 2, 3, 4, 6) for z in (100, 200, 300)]


def _formulas(memory: str):
    from dslc.build import load_text

    text = f"""
pipeline toy {{
    param steps: int = 10 in [1, 1000]
    param size: int = 100 in [1, 100000]
    stage S {{ iterations = 1; memory ~ {memory}; time ~ size }}
}}
"""
    return load_text(text, "toy.wf")["toy"]


def _advice(memory: str) -> str:
    def bytes_at(p):  # the stage holds steps squared latents: no declared term says so
        return 1000 + 50 * p["size"] + 7 * p["steps"] ** 2 * p["size"]

    records = [
        record(p, defaults={}, phases=[stage("S", 1000 + bytes_at(p), duration=1e-4 * p["size"])])
        for p in POINTS
    ]
    findings = check(_formulas(memory), records, TARGET, "cpu-live-tensors").findings
    (mismatch,) = [f for f in findings if f.kind == "formula-mismatch" and f.quantity == "memory"]
    return mismatch.next_step


@pytest.mark.parametrize("memory", ["[size, steps * size]", "max(min(steps, 4), 1) * size"])
def test_a_stage_with_a_term_in_steps_is_told_to_revise_it(memory):
    advice = _advice(memory)
    assert "add a term" not in advice
    assert advice.startswith("revise the terms in steps of S's `memory ~`")


def test_a_stage_without_one_is_told_to_add_it():
    assert _advice("size").startswith("add a term in steps to S's `memory ~`")
