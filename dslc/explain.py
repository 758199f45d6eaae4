"""`dslc explain` as data: each stage field's formula (lets inlined) and its values.

A measure of several terms is explained as its total, then each term on its own (`memory[0]`, ...).

The formulas come from `dslc.to_sympy` (sympy, in sympy's automatic canonical form: constants
folded, like terms collected; no costly `simplify`), turned back into the language's syntax tree
(`dslc.notation`) and printed by `dslc.fmt.format_expr`, so every formula re-parses to the same
value. A simplified formula is checked against the source at a few admissible points; when sympy
cannot express it, or it disagrees, the formula is printed unsimplified (lets inlined). The values
come from the runtime evaluator, the same one a serving worker uses. Nothing here prints to a
terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import attrs

from artifact.point import Point
from dslc import ast
from dslc.fmt import format_expr
from dslc.interp import EvalError, Interpreter, Value
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
    term: int | None = None  # a measure's term, 0-based as in `memory_terms()` (the total: None)

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
    probe: Point  # the full point: defaults with the probe's overrides
    target: Point  # the default workload
    fields: tuple[FieldExplanation, ...]


def ratio(target: int | Fraction, probe: int | Fraction) -> Fraction | None:
    if probe == 0:
        return None
    return Fraction(target) / Fraction(probe)


def explain(
    resolved: ResolvedPipeline,
    runtime_pipeline: Any,
    overrides: Point,
    target_overrides: Point | None = None,
) -> Explanation:
    """Explain `resolved` (the compiler's view), with values from `runtime_pipeline` (loaded).

    The target is the default workload with `target_overrides`; the probe is the target with
    `overrides` (unset params: the target's, as `dslc calibrate` fills them). Raises the
    runtime's typed errors for an unknown param, a wrong type or an inadmissible point.
    """
    target = {**runtime_pipeline.default_workload, **(target_overrides or {})}
    probe = {**target, **overrides}
    at_probe = runtime_pipeline.evaluate(**probe)
    at_target = runtime_pipeline.evaluate(**target)
    checks = FormulaChecks(resolved, sample_points(runtime_pipeline, probe))
    fields = []
    for stage in resolved.stages:
        for name in ast.FIELDS:
            declared = stage.field(name)
            formula = (
                show_formula(resolved, resolved.field_value(declared), checks)
                if declared is not None
                else "1"
            )
            p = getattr(at_probe[stage.name], name)
            t = getattr(at_target[stage.name], name)
            fields.append(
                FieldExplanation(stage.name, name, formula, declared is not None, p, t, ratio(t, p))
            )
            terms = resolved.terms(declared) if declared is not None else ()
            if len(terms) > 1:
                terms_of = (
                    runtime_pipeline.memory_terms
                    if name == "memory"
                    else runtime_pipeline.time_terms
                )
                probes = terms_of(stage.name, **probe)
                targets = terms_of(stage.name, **target)
                fields += [
                    FieldExplanation(
                        stage.name,
                        name,
                        show_formula(resolved, term, checks),
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
MAX_SHOWN_DEPTH = 100  # nor one nested deeper (the parser's own expression depth limit)
SAMPLE_POINTS = 12  # admissible points a simplified formula is checked at


def sample_points(pipeline: Any, probe: Point) -> list[dict[str, int | bool]]:
    """The probe, the default workload, and each param at its range's ends and middle (each walked
    down to an admissible value), bools flipped: where a wrong simplification would show."""
    target = dict(pipeline.default_workload)
    points = [dict(probe), target]
    for name, info in pipeline.params.items():
        if info.type == "bool":
            points.append({**target, name: not target[name]})
            continue
        top = info.max if info.max is not None else 2 * int(info.default) + 7
        for wanted in (info.min, info.min + 1, (info.min + top) // 2 + 1, top):
            others = {k: v for k, v in target.items() if k != name}
            value = pipeline.largest_admissible(name, wanted, **others)
            if value is not None:
                points.append({**target, name: value})
    unique = {tuple(sorted(p.items())): p for p in points}
    return list(unique.values())[:SAMPLE_POINTS]


class FormulaChecks:
    """The source's values at the sample points, to compare a simplified formula against."""

    def __init__(self, resolved: ResolvedPipeline, points: Sequence[Point]):
        self.lets = resolved.lets
        self.points = [
            {k: v if isinstance(v, bool) else Fraction(v) for k, v in p.items()} for p in points
        ]
        self.source = [Interpreter(point, self.lets) for point in self.points]

    def agree(self, original: ast.Expr, candidate: ast.Expr) -> bool:
        """Whether `candidate` (no lets) evaluates as `original` does at every sample point."""
        for point, source in zip(self.points, self.source):
            want, got = _value(source, original), _value(Interpreter(point), candidate)
            if want != got:
                return False
        return True


def _value(interpreter: Interpreter, expr: ast.Expr) -> Value | str:
    """A value, or the failure's message (a formula failing where the source fails agrees)."""
    try:
        return interpreter.eval(expr)
    except EvalError as exc:
        return f"error: {exc}"


def show_formula(resolved: ResolvedPipeline, expr: ast.Expr, checks: FormulaChecks) -> str:
    """`expr` with lets inlined, simplified when sympy can do it faithfully, in the language's
    own notation (`if cfg then 2 else 1`, `ceil`, `min`); too large a formula is summarised."""
    simplified = simplify(resolved, expr)
    if simplified is not None and checks.agree(expr, simplified):
        return format_expr(simplified)
    inlined = inline_lets(resolved, expr)
    if inlined is None:
        return f"(a formula of more than {MAX_SHOWN_NODES} nodes; too large to show)"
    return format_expr(inlined)


def simplify(resolved: ResolvedPipeline, expr: ast.Expr) -> ast.Expr | None:
    """sympy's canonical form of `expr` back as a syntax tree; None when sympy cannot give one the
    language can write within the display bounds."""
    from dslc.notation import Untranslatable, to_ast
    from dslc.to_sympy import LowerError, lower_field

    try:
        lowered = lower_field(resolved, expr)
        if tree_depth(lowered) > MAX_SHOWN_DEPTH or tree_size(lowered) > MAX_SHOWN_NODES:
            return None
        tree = to_ast(lowered)
    except (LowerError, Untranslatable, TypeError, ValueError, ArithmeticError, RecursionError):
        return None  # sympy refused, or produced something the language cannot write
    return tree if ast.depth(tree) <= MAX_SHOWN_DEPTH else None


def inline_lets(resolved: ResolvedPipeline, expr: ast.Expr) -> ast.Expr | None:
    """`expr` with every let replaced by its value, or None beyond MAX_SHOWN_NODES nodes or
    MAX_SHOWN_DEPTH levels (sizes are counted per let first, so a let chain never blows up)."""
    lets = {let.name: let.value for let in resolved.lets}
    shape: dict[str, tuple[int, int]] = {}  # let -> (nodes, depth) inlined, in dependency order
    for let in resolved.lets:
        shape[let.name] = _shape(let.value, shape)
    nodes, depth = _shape(expr, shape)
    if nodes > MAX_SHOWN_NODES or depth > MAX_SHOWN_DEPTH:
        return None
    return _substitute(expr, lets)


def _shape(expr: ast.Expr, lets: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    """Nodes and depth of `expr` once the lets (already measured) are inlined, capped."""
    if isinstance(expr, ast.Name) and expr.id in lets:
        return lets[expr.id]
    nodes, depth = 1, 0
    for child in ast.children(expr):
        n, d = _shape(child, lets)
        nodes, depth = min(nodes + n, 10 * MAX_SHOWN_NODES), max(depth, d)
    return nodes, depth + 1


def _substitute(expr: ast.Expr, lets: Mapping[str, ast.Expr]) -> ast.Expr:
    """`expr` with let names replaced by their (recursively substituted) values."""
    if isinstance(expr, ast.Name) and expr.id in lets:
        return _substitute(lets[expr.id], lets)
    if isinstance(expr, ast.Unary):
        return ast.Unary(expr.op, _substitute(expr.operand, lets))
    if isinstance(expr, ast.Binary):
        return ast.Binary(expr.op, _substitute(expr.left, lets), _substitute(expr.right, lets))
    if isinstance(expr, ast.IfElse):
        cond, then, orelse = (_substitute(e, lets) for e in (expr.cond, expr.then, expr.orelse))
        return ast.IfElse(cond, then, orelse)
    if isinstance(expr, ast.Call):
        return ast.Call(expr.func, tuple(_substitute(a, lets) for a in expr.args))
    if isinstance(expr, ast.ListLit):
        return ast.ListLit(tuple(_substitute(a, lets) for a in expr.items))
    return expr


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


def tree_depth(expr: object) -> int:
    """Levels of a sympy tree, counted over the shared DAG and capped past MAX_SHOWN_DEPTH."""
    depths: dict[int, int] = {}

    def depth(node: object, level: int) -> int:
        key = id(node)
        if key not in depths:
            if level > MAX_SHOWN_DEPTH:
                return level
            args = getattr(node, "args", ())
            depths[key] = 1 + max((depth(a, level + 1) for a in args), default=0)
        return depths[key]

    return depth(expr, 0)
