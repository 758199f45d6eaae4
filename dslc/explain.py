"""`dslc explain` as data: each stage field's formula (lets inlined) and its values.

A memory of several terms is explained as its total, then each term on its own (`memory[0]`, ...).

The formulas come from `dslc.lower` (sympy, in sympy's automatic canonical form: constants
folded, like terms collected; no costly `simplify`) and are printed in the language's own
notation; the values come from the runtime evaluator, the same one a serving worker uses.
Nothing here prints to a terminal.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import attrs

from dslc import ast
from dslc.model import ResolvedPipeline


@attrs.frozen
class FieldExplanation:
    stage: str
    field: str  # "iterations", "memory" or "time"
    formula: str  # simplified, lets inlined
    declared: bool  # False: the field's default (1), not written in the source
    probe: int | Fraction
    target: int | Fraction
    ratio: Fraction | None  # target / probe; None when the probe value is 0
    term: int | None = None  # a memory's term, 0-based as in `memory_terms()` (the total: None)

    @property
    def operator(self) -> str:
        return "=" if self.field == "iterations" else "~"

    @property
    def label(self) -> str:
        """`memory`, or `memory[1]` for a memory's second term (indexed as the runtime names it)."""
        return self.field if self.term is None else f"{self.field}[{self.term}]"


@attrs.frozen
class Explanation:
    pipeline: str
    probe: Mapping[str, int | bool]  # the full point: defaults with the probe's overrides
    target: Mapping[str, int | bool]  # the default workload
    fields: tuple[FieldExplanation, ...]


def ratio(target: int | Fraction, probe: int | Fraction) -> Fraction | None:
    if probe == 0:
        return None
    return Fraction(target) / Fraction(probe)


def explain(
    resolved: ResolvedPipeline, runtime_pipeline: Any, overrides: Mapping[str, int | bool]
) -> Explanation:
    """Explain `resolved` (the compiler's view), with values from `runtime_pipeline` (loaded).

    Raises the runtime's typed errors for an unknown param, a wrong type or an inadmissible probe.
    """
    import sympy

    from dslc.lower import lower_field

    at_probe = runtime_pipeline.evaluate(**overrides)
    at_target = runtime_pipeline.evaluate()
    target = dict(runtime_pipeline.default_workload)
    probe = {**target, **overrides}
    fields = []
    for stage in resolved.stages:
        for name in ast.FIELDS:
            declared = stage.field(name)
            formula = (
                lower_field(resolved, resolved.field_value(declared))
                if declared is not None
                else sympy.Integer(1)
            )
            p = getattr(at_probe[stage.name], name)
            t = getattr(at_target[stage.name], name)
            fields.append(
                FieldExplanation(
                    stage.name, name, show_formula(formula), declared is not None, p, t, ratio(t, p)
                )
            )
            terms = resolved.terms(declared) if declared is not None else ()
            if len(terms) > 1:
                probes = runtime_pipeline.memory_terms(stage.name, **overrides)
                targets = runtime_pipeline.memory_terms(stage.name)
                fields += [
                    FieldExplanation(
                        stage.name,
                        name,
                        show_formula(lower_field(resolved, term)),
                        True,
                        p,
                        t,
                        ratio(t, p),
                        index,
                    )
                    for index, (term, p, t) in enumerate(zip(terms, probes, targets))
                ]
    return Explanation(resolved.name, probe, target, tuple(fields))


MAX_SHOWN_NODES = 2000  # a formula larger than this (lets inlined) is summarised, not printed


def tree_size(expr: object) -> int:
    """Nodes of the printed tree, counted over the shared DAG (so counting never blows up)."""
    sizes: dict[int, int] = {}

    def size(node: object) -> int:
        key = id(node)
        if key not in sizes:
            args = getattr(node, "args", ())
            sizes[key] = min(1 + sum(size(a) for a in args), 10 * MAX_SHOWN_NODES)
        return sizes[key]

    return size(expr)


def show_formula(expr: Any) -> str:
    """A sympy formula in the language's own notation (`if cfg then 2 else 1`, `ceil`, `min`)."""
    size = tree_size(expr)
    if size > MAX_SHOWN_NODES:
        return f"(a formula of more than {MAX_SHOWN_NODES} nodes; too large to show)"
    return _printer().doprint(expr)


@functools.cache
def _printer() -> Any:
    import sympy
    from sympy.printing.precedence import PRECEDENCE
    from sympy.printing.str import StrPrinter

    class LanguagePrinter(StrPrinter):
        def _print_Piecewise(self, expr: Any) -> str:
            *pairs, last = expr.args
            if last.cond is not sympy.true:
                return super()._print_Piecewise(expr)
            text = self._print(last.expr)
            for value, cond in reversed(pairs):
                text = f"if {self._print(cond)} then {self._print(value)} else {text}"
            return f"({text})"

        def _call(self, name: str, expr: Any) -> str:
            return f"{name}({', '.join(self._print(a) for a in expr.args)})"

        def _print_floor(self, expr: Any) -> str:
            return self._call("floor", expr)

        def _print_ceiling(self, expr: Any) -> str:
            return self._call("ceil", expr)

        def _print_Min(self, expr: Any) -> str:
            return self._call("min", expr)

        def _print_Max(self, expr: Any) -> str:
            return self._call("max", expr)

        def _print_Abs(self, expr: Any) -> str:
            return self._call("abs", expr)

        def _print_Mod(self, expr: Any) -> str:
            a, b = expr.args
            level = PRECEDENCE["Mul"]
            return f"({self.parenthesize(a, level)} % {self.parenthesize(b, level + 1)})"

        def _print_Relational(self, expr: Any) -> str:  # Eq(a, b) -> a == b
            return f"{self._print(expr.lhs)} {expr.rel_op} {self._print(expr.rhs)}"

        def _print_And(self, expr: Any) -> str:
            return " and ".join(self.parenthesize(a, PRECEDENCE["And"] + 1) for a in expr.args)

        def _print_Or(self, expr: Any) -> str:
            return " or ".join(self.parenthesize(a, PRECEDENCE["Or"] + 1) for a in expr.args)

        def _print_Not(self, expr: Any) -> str:
            return "not " + self.parenthesize(expr.args[0], PRECEDENCE["Not"])

        def _print_BooleanTrue(self, expr: Any) -> str:
            return "true"

        def _print_BooleanFalse(self, expr: Any) -> str:
            return "false"

    return LanguagePrinter()
