"""The compiler's driver is one loop over one tuple of passes of one signature
(`dslc.passes.chain`), and each pass keeps to its own job: the cost pass checks the IR the emit
pass made and emits nothing."""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

import attrs

from dslc import compiler
from dslc.bombs import family_source
from dslc.compiler import compile_text
from dslc.parse import parse_text
from dslc.passes import chain
from dslc.passes.resolve import check_pipeline_names

ROOT = Path(__file__).resolve().parents[3]


def test_every_pass_has_the_one_signature() -> None:
    assert chain.PASSES[: len(chain.CHECKS)] == chain.CHECKS
    assert chain.PASSES[-1] is chain.prove_pass
    assert len(set(chain.PASSES)) == len(chain.PASSES) == 11
    for step in chain.PASSES:
        hints = typing.get_type_hints(step)
        assert list(inspect.signature(step).parameters) == ["unit", "compilation"], step
        assert hints == {"unit": chain.Unit, "compilation": chain.Compilation, "return": chain.Unit}


def test_the_driver_calls_no_pass_itself() -> None:
    """compile_sources parses, then hands each pipeline to `run_passes`: no pass is named there."""
    source = inspect.getsource(compiler.compile_sources)
    assert "run_passes(" in source
    for step in chain.PASSES:
        assert step.__name__ not in source
    for called in ("check_types", "check_cost", "resolve_params", "check_properties", "flatten"):
        assert called not in inspect.getsource(compiler)


def _compilation(text: str) -> tuple[chain.Compilation, list[str]]:
    module = parse_text(text, "family.wf")
    by_name, problems = check_pipeline_names([module])
    assert problems == []
    return chain.Compilation(by_name, {"family.wf": 0}), list(by_name)


def test_the_cost_pass_reads_the_ir_and_emits_nothing() -> None:
    compilation, names = _compilation(family_source(6, 3))
    ir = compilation.ir
    up_to_emit = chain.CHECKS[: chain.CHECKS.index(chain.emit_pass) + 1]
    for name in names:
        unit = chain.run_passes(chain.Unit(name), compilation, up_to_emit)
        assert not unit.stopped and unit.document is not None
        before = (dict(ir.entries), dict(ir.spans), dict(ir.contexts))
        checked = len(compilation.budget.checked.entries)
        after = chain.cost_pass(unit, compilation)
        assert after == unit and not after.stopped  # nothing found, nothing changed
        assert (dict(ir.entries), dict(ir.spans), dict(ir.contexts)) == before
        assert len(compilation.budget.checked.entries) >= checked  # its own cache only
    assert len(ir.entries) > 0


def test_a_stopped_unit_runs_no_later_pass() -> None:
    compilation, names = _compilation("pipeline a {\n    let x = y\n    let y = x\n}\n")
    ran: list[str] = []

    def spy(step: chain.Pass) -> chain.Pass:
        def run(unit: chain.Unit, compilation: chain.Compilation) -> chain.Unit:
            ran.append(step.__name__)
            return step(unit, compilation)

        return run

    unit = chain.run_passes(chain.Unit(names[0]), compilation, tuple(map(spy, chain.PASSES)))
    assert unit.stopped and [d.code for d in unit.problems] == ["cycle"]
    assert ran == ["flatten_pass", "names_pass", "facts_pass", "order_pass"]


def test_the_program_carries_nothing_of_the_emitter() -> None:
    result = compile_text(family_source(4, 2), "family.wf")
    assert result.program is not None and result.emitted is not None
    fields = {field.name for field in attrs.fields(type(result.program))}
    assert fields == {"sources", "modules", "pipelines"}
    assert result.emitted.ir.entries  # the driver hands the emitted IR to `dslc.build`
