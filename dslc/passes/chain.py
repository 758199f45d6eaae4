"""The passes of one pipeline, in order: each is a plain function `(Unit, Compilation) -> Unit`,
listed once in `PASSES` and run by one loop (as sqlglot's optimizer runs its rules).

A `Unit` is one pipeline on its way through: what it has become so far and every diagnostic found.
A pass returns a new unit; one that finds what later passes cannot go past stops it. The
`Compilation` holds what the passes share across the pipelines of one compilation: the pipelines
by name, the per-member findings, the emitted IR, the artifact-wide cost budget and the proofs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from artifact.write import JsonObject
from dslc import ast
from dslc.diagnostics import Diagnostic
from dslc.emit import Emitted, IrCache, pipeline_document
from dslc.model import ResolvedPipeline
from dslc.passes.aside import Broken, broken_members, set_aside
from dslc.passes.cost import CostBudget, check_cost
from dslc.passes.domain import check_default_workload, resolve_params
from dslc.passes.facts import check_facts
from dslc.passes.members import Members
from dslc.passes.prove import ProofCache, check_properties
from dslc.passes.resolve import check_names, flatten, order_lets
from dslc.passes.types import check_types

__all__ = ["CHECKS", "PASSES", "Compilation", "Pass", "Unit", "run_passes"]


class Compilation:
    """What the passes share across the pipelines of one compilation (each cache holds what was
    found of a member once, so a family costs what its own members cost: issue 23)."""

    def __init__(self, by_name: dict[str, ast.Pipeline], index: Mapping[str, int]) -> None:
        self.by_name = by_name
        self.members = Members()  # names and types per member expression
        self.ir = IrCache(index)  # the emit pass's
        self.budget = CostBudget()  # the cost pass's
        self.proofs = ProofCache()  # the prover's: a child re-proves only what it changed

    @property
    def emitted(self) -> Emitted:
        """The IR and what the loader's checks made of it, for `dslc.build` to reuse."""
        return Emitted(self.ir, self.budget.checked)


@attrs.frozen
class Unit:
    """One pipeline on its way through the passes."""

    name: str
    pipeline: ResolvedPipeline | None = None
    problems: tuple[Diagnostic, ...] = ()
    stopped: bool = False  # a pass found what later passes cannot go past
    # An error no member can be set aside for (a param, a contract): the domain checks still run,
    # then the pipeline stops (everything may depend on it).
    held: bool = False
    document: JsonObject | None = attrs.field(default=None, eq=False, repr=False)

    def found(self, problems: list[Diagnostic], **changes: Any) -> Unit:
        """This unit with more problems (and other changes)."""
        return attrs.evolve(self, problems=(*self.problems, *problems), **changes)

    def stop(self, problems: list[Diagnostic]) -> Unit:
        """This unit with more problems, stopped."""
        return self.found(problems, stopped=True)

    @property
    def resolved(self) -> ResolvedPipeline:
        """The pipeline, for the passes that run after `flatten` made one."""
        assert self.pipeline is not None, "flatten runs first and stops when it makes none"
        return self.pipeline


Pass = Callable[[Unit, Compilation], Unit]


def flatten_pass(unit: Unit, compilation: Compilation) -> Unit:
    """Inheritance flattened: the parent chain's members merged into one pipeline."""
    pipeline, problems = flatten(unit.name, compilation.by_name)
    if pipeline is None:
        return unit.stop(problems)
    return unit.found(problems, pipeline=pipeline)


def names_pass(unit: Unit, compilation: Compilation) -> Unit:
    """Every name a param or a let, every call a known function."""
    return unit.found(check_names(unit.resolved, members=compilation.members))


def facts_pass(unit: Unit, compilation: Compilation) -> Unit:
    """Stage facts, probe lines and call arguments."""
    return unit.found(check_facts(unit.resolved))


def order_pass(unit: Unit, compilation: Compilation) -> Unit:
    """Lets in dependency order; a cycle stops the pipeline."""
    lets, cycle = order_lets(unit.resolved)
    if cycle:
        return unit.stop(cycle)
    return unit.found([], pipeline=attrs.evolve(unit.resolved, lets=lets))


def types_pass(unit: Unit, compilation: Compilation) -> Unit:
    """Every member typed; a type error in a param or a contract stops the pipeline before its
    params are evaluated."""
    types, problems = check_types(unit.resolved, compilation.members)
    if broken_members(unit.resolved, problems) is None:
        return unit.stop(problems)
    return unit.found(problems, pipeline=attrs.evolve(unit.resolved, types=types))


def aside_pass(unit: Unit, compilation: Compilation) -> Unit:
    """The members errors lie in set aside, so that the rest is still checked and proved."""
    broken = broken_members(unit.resolved, unit.problems)
    pipeline = set_aside(unit.resolved, broken or Broken())
    return unit.found([], pipeline=pipeline, held=broken is None)


def domain_pass(unit: Unit, compilation: Compilation) -> Unit:
    """Point' defaults and ranges evaluated (constants only) and probe minimums within them."""
    resolved, problems = resolve_params(unit.resolved)
    if resolved is None or problems or unit.held:
        return unit.stop(problems)
    return unit.found(problems, pipeline=resolved)


def emit_pass(unit: Unit, compilation: Compilation) -> Unit:
    """The pipeline's IR, as `dslc build` writes it (inherited members are the objects emitted
    for the parent)."""
    ir = compilation.ir
    return unit.found([], document=pipeline_document(unit.resolved, ir.index, cache=ir))


def cost_pass(unit: Unit, compilation: Compilation) -> Unit:
    """The IR validated by the loader's own checks and limits, before anything is evaluated."""
    assert unit.document is not None, "the emit pass runs before the cost pass"
    problems = check_cost(unit.resolved, unit.document, compilation.ir, compilation.budget)
    return unit.stop(problems) if problems else unit


def default_workload_pass(unit: Unit, compilation: Compilation) -> Unit:
    """Every contract holds at the default workload."""
    problems = check_default_workload(unit.resolved)
    return unit.stop(problems) if problems else unit


def prove_pass(unit: Unit, compilation: Compilation) -> Unit:
    """Iterations non-negative integers, measures non-negative, no divisor zero: proved,
    refuted with an admissible point, or left unproven (a warning)."""
    return unit.found(check_properties(unit.resolved, proofs=compilation.proofs))


CHECKS: tuple[Pass, ...] = (
    flatten_pass,
    names_pass,
    facts_pass,
    order_pass,
    types_pass,
    aside_pass,
    domain_pass,
    emit_pass,
    cost_pass,
    default_workload_pass,
)
PASSES: tuple[Pass, ...] = (*CHECKS, prove_pass)


def run_passes(unit: Unit, compilation: Compilation, passes: tuple[Pass, ...] = PASSES) -> Unit:
    """Each pass in turn, until one stops the unit."""
    for step in passes:
        unit = step(unit, compilation)
        if unit.stopped:
            break
    return unit
