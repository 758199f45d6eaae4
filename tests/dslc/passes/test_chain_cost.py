"""Issue 23: checking an inheritance chain costs what its new members cost, and stays sound.

The prover's cache keys an obligation by its expression, the params' ranges and contracts, and the
lets it (or a contract) reads: work is counted as obligations settled afresh (`ProofCache.misses`),
never by the clock. The cache must never change a diagnostic: every golden case, formula file and
chain gives the same diagnostics with the cache as with a cache that remembers nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import dslc.passes.chain
from dslc.bombs import inheritance_chain_source as chain_source
from dslc.compiler import compile_paths, compile_text
from dslc.diagnostics import render
from dslc.emit import IrCache
from dslc.passes.cost import CostBudget
from dslc.passes.members import Members
from dslc.passes.prove import ProofCache, check_properties
from dslc.passes.resolve import check_names
from dslc.passes.types import check_types

ROOT = Path(__file__).resolve().parents[3]


def work(n: int) -> tuple[int, int]:
    """Obligations the prover settled afresh, and formulas walked for their divisions, over a
    checked chain of `n` pipelines."""
    result = compile_text(chain_source(n), "chain.wf")
    assert result.ok and result.program is not None, [d.message for d in result.diagnostics]
    proofs = ProofCache()
    for pipeline in result.program.pipelines:
        assert check_properties(pipeline, proofs=proofs) == []
    return proofs.misses, len(proofs.sites)


def test_a_chain_costs_what_its_new_members_cost() -> None:
    """Each child adds a let and a stage: a constant number of new obligations and formulas to
    walk, the inherited ones are cache hits, so the work grows linearly with the chain (not with
    its square)."""
    first, ten, eleven, thirty = work(1), work(10), work(11), work(30)
    for kind in (0, 1):  # proofs, then division walks
        per_member = eleven[kind] - ten[kind]
        assert 1 <= per_member <= 4  # the new let, the new stage's fields, its division
        assert ten[kind] == first[kind] + 9 * per_member
        assert thirty[kind] - ten[kind] == 20 * per_member
    assert thirty[0] < 30 * 30  # a chain re-proving what it inherits settles ~ n**2 / 2 * 3


def test_a_child_that_adds_an_unread_let_reuses_every_proof() -> None:
    text = (
        "pipeline base {\n    param n: int = 4 in [1, 10]\n    let d = n\n"
        "    stage S { iterations = n; memory ~ 100 / d }\n}\n"
        "pipeline kid extends base {\n    let e = n * 2\n}\n"
    )
    result = compile_text(text, "u.wf")
    assert result.ok and result.program is not None
    base, kid = result.program.pipelines
    proofs = ProofCache()
    check_properties(base, proofs=proofs)
    before = proofs.misses
    assert check_properties(kid, proofs=proofs) == []
    assert proofs.misses == before  # `e` has no division and no field reads it


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("let d = n - 1", "division by zero in 'memory' of stage 'S' in pipeline 'kid' at n = 1"),
        ("let k = n - 1", "division by zero in 'memory' of stage 'S' in pipeline 'kid' at n = 1"),
        ("param n: int = 4 in [0, 10]", "division by zero in 'memory' of stage 'S' in pipeline"),
    ],
)
def test_a_child_that_changes_what_a_member_reads_is_proved_again(
    override: str, expected: str
) -> None:
    """An inherited member whose let (directly or through another let) or param range changed is
    not a cache hit: the child's own error is found."""
    text = (
        "pipeline base {\n    param n: int = 4 in [1, 10]\n    let k = n\n    let d = k\n"
        "    stage S { iterations = n; memory ~ 100 / d }\n}\n"
        f"pipeline kid extends base {{\n    {override}\n}}\n"
    )
    result = compile_text(text, "o.wf")
    assert [d.code for d in result.errors] == ["division-by-zero"]
    assert result.errors[0].message.startswith(expected)


def test_a_let_read_by_a_contract_is_part_of_every_key() -> None:
    """A contract that reads a let narrows every param's domain: changing that let re-proves all."""
    text = (
        "pipeline base {\n    let lo = 1\n    param n: int = 4 in [0, 10] where n >= lo\n"
        "    stage S { iterations = n; memory ~ 100 / n }\n}\n"
        "pipeline kid extends base {\n    let lo = 0\n}\n"
    )
    result = compile_text(text, "c.wf")
    codes = [(d.code, d.message) for d in result.diagnostics]
    assert any(code == "division-by-zero" and "'kid'" in message for code, message in codes), codes
    assert not any("'base'" in message or "kid" not in message for _, message in codes), codes


class _Forgetful(dict):  # type: ignore[type-arg]
    """A memo that remembers nothing: every lookup misses."""

    def get(self, key: object, default: object = None) -> object:
        return default

    def __contains__(self, key: object) -> bool:
        return False


class _NoReuse(ProofCache):
    """The prover with nothing shared between pipelines: the reference for the cache."""

    def __init__(self) -> None:
        super().__init__()
        self.outcomes = _Forgetful()
        self.sites = _Forgetful()


class _NoMembers(Members):
    """The cheap passes with nothing shared between pipelines: each walks every expression."""

    def __init__(self) -> None:
        super().__init__()
        self._names = _Forgetful()
        self.fields = _Forgetful()


class _NoSharing(CostBudget):
    """The cost pass checking every pipeline's IR afresh, nothing shared."""

    def __init__(self) -> None:
        super().__init__()
        self.checked.entries = _Forgetful()


class _NoSharedIr(IrCache):
    """The emit pass emitting every pipeline afresh, nothing shared."""

    def __init__(self, index: dict[str, int]) -> None:
        super().__init__(index)
        self.entries = _Forgetful()


def _rendered(paths: list[str]) -> str:
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return "\n".join(render(d) for d in compile_paths(paths).diagnostics)
    finally:
        os.chdir(cwd)


CASES = sorted(
    p.relative_to(ROOT).as_posix()
    for p in [*(ROOT / "tests" / "golden").rglob("*.wf"), *(ROOT / "formulas").glob("*.wf")]
)


@pytest.mark.parametrize("case", CASES)
def test_the_caches_change_no_diagnostic(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the prover's cache, nor the walks and types kept per member, nor the shared emission."""
    shared = _rendered([case])
    monkeypatch.setattr(dslc.passes.chain, "ProofCache", _NoReuse)
    monkeypatch.setattr(dslc.passes.chain, "Members", _NoMembers)
    monkeypatch.setattr(dslc.passes.chain, "CostBudget", _NoSharing)
    monkeypatch.setattr(dslc.passes.chain, "IrCache", _NoSharedIr)
    assert _rendered([case]) == shared


def member_work(n: int) -> tuple[int, int]:
    """Expressions walked for their names, and fields typed, checking a chain of `n`."""
    result = compile_text(chain_source(n), "chain.wf")
    assert result.ok and result.program is not None
    members = Members()
    for pipeline in result.program.pipelines:
        assert check_names(pipeline, members=members) == []
        assert check_types(pipeline, members)[1] == []
    return members.walks, len(members.fields)


def test_walking_and_typing_a_chain_costs_its_new_members() -> None:
    first, ten, eleven, thirty = (member_work(n) for n in (1, 10, 11, 30))
    for kind in (0, 1):
        per_member = eleven[kind] - ten[kind]
        assert 1 <= per_member <= 4  # the new let and the new stage's fields
        assert thirty[kind] - ten[kind] == 20 * per_member
        assert ten[kind] == first[kind] + 9 * per_member


def test_the_cache_changes_no_diagnostic_of_a_chain_with_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chain whose members each break something (a negative, a division, an unproven field)."""
    text = chain_source(8) + (
        "pipeline bad extends p7 {\n    param steps: int = 4 in [0, 1000]\n"
        "    let l3 = steps - 2\n    stage B { iterations = steps / 3; memory ~ width / l3 }\n}\n"
    )
    shared = [render(d) for d in compile_text(text, "e.wf").diagnostics]
    assert any("error[" in line for line in shared)
    monkeypatch.setattr(dslc.passes.chain, "ProofCache", _NoReuse)
    assert [render(d) for d in compile_text(text, "e.wf").diagnostics] == shared
