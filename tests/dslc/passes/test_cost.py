"""The static cost model at compile time: every bomb of issue 13 is a `limit` diagnostic pointing at
its source, found before anything is evaluated; and what checks, builds and loads.

Work is bounded without clocks: a bomb refused by the cost pass never reaches the default-workload
check or the prover (no other diagnostic appears), and the squaring chain, whose values the
compiler used to compute, is refused at a let that has not been evaluated.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings

from artifact.document import read_artifact
from dslc import bombs, emit, limits
from dslc.build import load_program
from dslc.compiler import CompileResult, compile_text
from dslc.diagnostics import Diagnostic
from dslc.model import ResolvedPipeline
from dslc.testing import sources
from runtime import load_formulas


def limit_errors(result: CompileResult) -> list[Diagnostic]:
    """The errors, which must all be `limit` diagnostics (and at least one)."""
    assert result.errors, [d.message for d in result.diagnostics]
    assert all(d.code == "limit" for d in result.errors), [
        f"{d.code}: {d.message}" for d in result.errors
    ]
    return list(result.errors)


def builds_and_loads(text: str) -> None:
    """check-ok implies build-ok implies load-ok: the artifact loads in the runtime."""
    result = compile_text(text, "ok.wf")
    assert result.ok, [f"{d.code}: {d.message}" for d in result.errors]
    assert result.program is not None
    book = load_program(result.program)
    for name in book:
        book[name].evaluate()


def line_of(diagnostic: Diagnostic) -> int:
    assert diagnostic.span is not None
    return diagnostic.span.line


def test_nested_powers() -> None:
    builds_and_loads(bombs.nested_powers_source(1))
    for depth in (2, 5, 6):  # 5 deep: 862 bytes once took the loader 5-13 s
        (error,) = limit_errors(compile_text(bombs.nested_powers_source(depth), "p.wf"))
        assert line_of(error) == 3


def test_a_constant_squaring_chain_is_a_limit_at_the_let() -> None:
    builds_and_loads(bombs.squaring_chain_source(10))
    for length in (24, 29, 40):  # 606 bytes: once ~6 s to check; 29 lets: killed at 60 s
        (error,) = limit_errors(compile_text(bombs.squaring_chain_source(length), "c.wf"))
        assert "word operations" in error.message or "bits" in error.message
        assert 4 <= line_of(error) <= 4 + 24  # at `let aN = ...`, well before the last let


def test_a_huge_exponent_is_a_limit_not_a_type_error() -> None:
    text = "pipeline p {\n    param x: int = 2 in [0, 9]\n    let y = x ** (2 ** 100)\n}\n"
    (error,) = limit_errors(compile_text(text, "e.wf"))
    assert "exponent" in error.message and line_of(error) == 3
    text = "pipeline p {\n    param x: int = 2 in [0, 9]\n    let y = x ** 2 ** 2 ** 2 ** 2\n}\n"
    limit_errors(compile_text(text, "e.wf"))


def test_a_flood_of_blank_lines_counts_as_tokens() -> None:
    (error,) = limit_errors(compile_text(bombs.blank_flood_source(900_000), "b.wf"))
    assert "tokens" in error.message
    builds_and_loads(bombs.blank_flood_source(1000))
    assert limits.MAX_TOKENS < 900_000


def test_a_name_the_loader_refuses_is_refused_by_check() -> None:
    long = "s" * (limits.MAX_NAME_LENGTH + 1)
    text = (
        f"pipeline p {{\n    param {long}: int = 1 in [0, 9]\n"
        f"    stage S {{ iterations = {long} }}\n}}\n"
    )
    (error,) = limit_errors(compile_text(text, "n.wf"))
    assert "65 characters" in error.message and line_of(error) == 2
    assert error.span is not None and error.span.column == 11  # the name itself
    builds_and_loads(text.replace(long, long[:-1]))
    stage = f"pipeline p {{\n    stage {long} {{ iterations = 1 }}\n}}\n"
    (error,) = limit_errors(compile_text(stage, "n.wf"))
    assert line_of(error) == 2


def test_flattened_extends_beyond_the_loaders_node_limit_is_refused_by_check() -> None:
    builds_and_loads(bombs.flattened_nodes_source(10, 150))
    text = bombs.flattened_nodes_source(800, 150)  # ~300 nodes per child, 800 children
    result = compile_text(text, "f.wf")
    (error,) = limit_errors(result)
    assert f"{limits.MAX_NODES:,} expression nodes" in error.message


def test_a_sum_folding_deeper_than_the_loader_allows_is_refused_by_check() -> None:
    (error,) = limit_errors(compile_text(bombs.flattened_nodes_source(0, 300), "d.wf"))
    assert "deeper" in error.message and line_of(error) == 3


def test_members_inherited_beyond_the_limit_are_refused_by_check() -> None:
    lets = "".join(f"    let a{i} = {i}\n" for i in range(300))
    more = "".join(f"    let b{i} = {i}\n" for i in range(300))
    text = f"pipeline base {{\n{lets}}}\npipeline child extends base {{\n{more}}}\n"
    (error,) = limit_errors(compile_text(text, "m.wf"))
    assert "params, lets and stages" in error.message


def test_let_and_contract_fan_out_compile_and_load() -> None:
    builds_and_loads(bombs.let_fan_out_source(200, 64))
    builds_and_loads(bombs.contract_fan_out_source(100))
    limit_errors(compile_text(bombs.contract_fan_out_source(600), "c.wf"))


def test_an_unbounded_param_is_bounded_by_the_largest_request_value() -> None:
    text = "pipeline p {\n    param n: int = 2\n    stage S { memory ~ n ** 12 }\n}\n"
    (error,) = limit_errors(compile_text(text, "u.wf"))
    assert "bits" in error.message and error.hints
    builds_and_loads(text.replace("param n: int = 2", "param n: int = 2 in [0, 10 ** 6]"))


# A generated program is slow to draw (~0.1 s), so generation alone can exceed too_slow's limit.
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sources())
def test_check_ok_implies_build_ok_implies_load_ok(text: str) -> None:
    result = compile_text(text, "g.wf")
    assert result.ok and result.program is not None, result.diagnostics  # clean by construction
    document = json.loads(emit.dumps(emit.artifact(result.program)))
    read_artifact(document)
    book = load_formulas(document)
    for name in book:
        book[name].evaluate()


def test_every_source_bomb_family_is_a_limit_or_builds_and_loads() -> None:
    rng = random.Random(13)
    for family, make in bombs.SOURCE_BOMBS.items():
        text = make(rng)
        result = compile_text(text, f"{family}.wf")
        if result.ok:
            builds_and_loads(text)
        else:
            limit_errors(result)


def test_children_reuse_their_parents_proofs() -> None:
    """A child re-proves only what it changed: extending 60 stages costs no prover work."""
    from dslc.passes.prove import ProofCache, check_properties

    result = compile_text(bombs.extends_chain_source(30, 60), "x.wf")
    assert result.ok and result.program is not None
    base, *children = result.program.pipelines
    proofs = ProofCache()
    assert check_properties(base, proofs=proofs) == []
    settled, spent = len(proofs.outcomes), dict(proofs.spent)
    assert settled >= 60 * 3
    for child in children:  # defaults changed: ranges, contracts and lets did not
        assert check_properties(child, proofs=proofs) == []
    assert len(proofs.outcomes) == settled and proofs.spent == spent


def test_a_child_that_changes_a_range_is_proved_again() -> None:
    from dslc.passes.prove import ProofCache, check_properties

    text = (
        "pipeline base {\n    param n: int = 4 in [1, 100]\n"
        "    stage S { iterations = n - 1 }\n}\n"
        "pipeline wide extends base {\n    param n: int = 4 in [0, 100]\n}\n"
    )
    result = compile_text(text, "r.wf")
    assert [e.code for e in result.errors] == ["negative"]  # only the child: n = 0 gives -1
    assert result.errors[0].message.endswith("in pipeline 'wide' is -1 at n = 0")
    program = compile_text(text.replace("[0, 100]", "[2, 100]"), "r.wf").program
    assert program is not None
    proofs = ProofCache()
    check_properties(program.pipelines[0], proofs=proofs)
    settled = len(proofs.outcomes)
    check_properties(program.pipelines[1], proofs=proofs)
    assert len(proofs.outcomes) > settled  # a new range: its obligations are its own


def test_the_prover_budget_per_file_is_a_limit() -> None:
    from dslc.passes.prove import ProofCache, check_properties

    text = "".join(
        f"pipeline p{i} {{\n    param a: int = 3 in [0, 1000]\n    param b: int = 5 in [0, 1000]\n"
        f"    stage S {{ memory ~ a * a - 2 * a * b + b * b + {i} }}\n}}\n"
        for i in range(3)
    )
    program = compile_text(text, "h.wf").program
    assert program is not None
    proofs = ProofCache(work_per_file=1)
    check_properties(program.pipelines[0], proofs=proofs)
    (over,) = check_properties(program.pipelines[1], proofs=proofs)
    assert over.code == "limit" and "budget" in over.message and line_of(over) == 6


def test_children_that_change_only_defaults_are_charged_without_a_second_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cost pass validates a pipeline once per distinct set of formulas and ranges, yet charges
    the artifact's node and work budgets for every child exactly as a fresh check would."""
    from dslc.emit import IrCache, pipeline_document
    from dslc.passes import cost

    program = compile_text(bombs.extends_chain_source(30, 60), "x.wf").program
    assert program is not None

    def check(pipeline: ResolvedPipeline, budget: cost.CostBudget, ir: IrCache) -> list:
        document = pipeline_document(pipeline, ir.index, cache=ir)
        return cost.check_cost(pipeline, document, ir, budget)

    fresh = []
    for pipeline in program.pipelines:
        alone = cost.CostBudget()
        assert check(pipeline, alone, IrCache({"x.wf": 0})) == []
        fresh.append((alone.nodes.left, alone.nodes.work_left))
    checked = []
    real = cost.parse_pipeline

    def counting(*args):
        checked.append(args[2])
        return real(*args)

    monkeypatch.setattr(cost, "parse_pipeline", counting)
    shared, ir = cost.CostBudget(), IrCache({"x.wf": 0})
    for pipeline in program.pipelines:
        assert check(pipeline, shared, ir) == []
    assert checked == [0]  # the base only: every child changes defaults alone
    start = cost.CostBudget().nodes
    assert shared.nodes.left - start.left == sum(left - start.left for left, _ in fresh)
    assert shared.nodes.work_left - start.work_left == sum(w - start.work_left for _, w in fresh)


def test_a_child_the_loader_would_refuse_by_name_is_refused_after_its_parent_passed() -> None:
    long = "c" * (limits.MAX_NAME_LENGTH + 1)
    text = bombs.extends_chain_source(1, 3) + f"pipeline {long} extends base {{}}\n"
    (error,) = limit_errors(compile_text(text, "n.wf"))
    assert "65 characters" in error.message


def test_children_do_not_walk_inherited_formulas_for_their_divisions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dslc.passes import obligations
    from dslc.passes.prove import ProofCache, check_properties

    program = compile_text(bombs.extends_chain_source(5, 20), "x.wf").program
    assert program is not None
    walked: list[object] = []
    real = obligations._division_sites

    def walking(ctx, expr):
        walked.append(expr)
        return real(ctx, expr)

    monkeypatch.setattr(obligations, "_division_sites", walking)
    proofs = ProofCache()
    base, *children = program.pipelines
    assert check_properties(base, proofs=proofs) == []
    first = len(walked)
    assert first >= 20 * 2  # every stage's iterations and memory at least
    for child in children:  # defaults changed: the same formulas, ranges and lets
        assert check_properties(child, proofs=proofs) == []
    assert len(walked) == first


def test_the_loaders_refusal_says_where_and_which_limit_without_being_read_back() -> None:
    """The cost pass walks the error's `location` and reads its `limit`, never its text."""
    from artifact import limits as artifact_limits
    from artifact.errors import ArtifactLimitError

    with pytest.raises(ArtifactLimitError) as info:
        load_formulas(bombs.nested_powers_artifact(6))
    error = info.value
    assert error.location[:3] == ("pipelines", 0, "stages")
    assert error.path == "".join(
        f"[{step}]" if isinstance(step, int) else f".{step}" for step in error.location
    ).lstrip(".")
    assert error.limit == "MAX_VALUE_BITS"
    assert hasattr(artifact_limits, error.limit)
