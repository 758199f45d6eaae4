"""Obligations: what the prover must show of a pipeline, and how one is checked at a point.

Each stage field owes `>= 0` (a memory of several terms: each term on its own) and `iterations` an
integer value; each division in a field, let, contract or call owes a non-zero divisor wherever it
is evaluated: under the conditions of the `if` branches and `and`/`or` operands it sits in, and for
a contract, where the contracts before it hold.
A let is a value on the whole domain, so its divisions are checked there, used or not.
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from dslc import ast
from dslc.interp import EvalError, Interpreter
from dslc.model import ResolvedPipeline
from dslc.passes.context import Context

INTEGER, NONNEG, DIVISOR = "integer", "nonneg", "divisor"


@attrs.define(eq=False)
class Obligation:
    kind: str
    expr: ast.Expr  # the whole expression evaluated: a field's value, a let's value, a contract
    node: ast.Expr  # the culprit: the field's value, or the division
    what: str  # "'iterations' of stage 'X'", "let 'r'", "the contract of 'steps'"
    facts: tuple[tuple[ast.Expr, bool], ...] = ()  # conditions under which a division happens
    contract: int | None = None  # index of the contract a division lies in
    proved: bool = False
    refuted: tuple[dict, object] | None = None  # (point, value or EvalError)

    @property
    def open(self) -> bool:
        return not self.proved and self.refuted is None


#: Where an expression divides by something not a non-zero constant: (division, conditions) in
#: walk order, by the expression's id and the lets it reads (`Context.lets_read`: their constants
#: decide which divisors are safe); the expression and those lets' values kept alive beside them.
Sites = dict[
    object,
    tuple[
        ast.Expr,
        list[tuple[ast.Binary, tuple[tuple[ast.Expr, bool], ...]]],
        tuple[ast.Expr, ...],
    ],
]


def collect(
    pipeline: ResolvedPipeline, ctx: Context, sites: Sites | None = None
) -> list[Obligation]:
    """Every obligation of a pipeline: contracts' and lets' divisions, then each stage's fields.

    `sites`, shared by the pipelines of a compilation, spares a child walking the formulas it
    inherited again (when the lets they read are the same)."""
    out: list[Obligation] = []
    memo: Sites = {} if sites is None else sites
    for index, (param, where) in enumerate(pipeline.contracts):
        out += _divisions(ctx, where, f"the contract of '{param.name}'", index, memo)
    for let in pipeline.lets:
        out += _divisions(ctx, let.value, f"let '{let.name}'", None, memo)
    for call in pipeline.calls:  # a call's value has no sign or integrality to prove
        out += _divisions(ctx, call.value, f"call '{call.arg}'", None, memo)
    for stage in pipeline.stages:
        for name in ast.FIELDS:
            field = stage.fields.get(name)
            if field is None:
                continue
            what = f"'{name}' of stage '{stage.name}'{_inherited(pipeline, field)}"
            if name == "iterations":
                out.append(Obligation(INTEGER, field.value, field.value, what))
            out += _measure(ctx, pipeline.terms(field), field.value, what, memo)
    return out


def _measure(
    ctx: Context, terms: tuple[ast.Expr, ...], value: ast.Expr, what: str, memo: Sites
) -> list[Obligation]:
    """Each term of a measure owes `>= 0` on its own (so the sum does); an inline term's divisions
    too (a list let's are the let's).
    """
    out = []
    for index, term in enumerate(terms, 1):
        label = f"term {index} of {what}" if len(terms) > 1 else what
        out.append(Obligation(NONNEG, term, term, label))
        if not isinstance(value, ast.Name) or term is value:
            out += _divisions(ctx, term, label, None, memo)
    return out


def _inherited(pipeline: ResolvedPipeline, field: ast.Field) -> str:
    """' in pipeline CHILD' for a field declared outside the pipeline being checked."""
    outer, inner = pipeline.span, field.span
    if outer is None or inner is None:
        return ""
    inside = outer.source.name == inner.source.name and (outer.line, outer.column) <= (
        inner.line,
        inner.column,
    ) <= (outer.end_line, outer.end_column)
    return "" if inside else f" in pipeline '{pipeline.name}'"


def _divisions(
    ctx: Context, expr: ast.Expr, what: str, contract: int | None, memo: Sites
) -> list[Obligation]:
    """Each division in `expr` by something not a non-zero constant, with the conditions it sits
    under.
    """
    key = (id(expr), ctx.lets_read(expr))
    known = memo.get(key)
    if known is None:
        lets = tuple(let.value for let in ctx.needed_lets(expr))
        known = memo[key] = (expr, _division_sites(ctx, expr), lets)
    return [Obligation(DIVISOR, expr, node, what, facts, contract) for node, facts in known[1]]


def _division_sites(
    ctx: Context, expr: ast.Expr
) -> list[tuple[ast.Binary, tuple[tuple[ast.Expr, bool], ...]]]:
    """The divisions of `_divisions`, with their conditions, in walk order."""
    out = []
    stack: list[tuple[ast.Expr, tuple[tuple[ast.Expr, bool], ...]]] = [(expr, ())]
    while stack:
        node, facts = stack.pop()
        if isinstance(node, ast.IfElse):
            stack += [
                (node.orelse, facts + ((node.cond, False),)),
                (node.then, facts + ((node.cond, True),)),
                (node.cond, facts),
            ]
            continue
        if isinstance(node, ast.Binary) and node.op in ("and", "or"):
            stack += [(node.right, facts + ((node.left, node.op == "and"),)), (node.left, facts)]
            continue
        if isinstance(node, ast.Binary) and node.op in ("/", "//", "%"):
            divisor = ctx.constant(node.right)
            if not (isinstance(divisor, Fraction) and divisor != 0):
                out.append((node, facts))
        stack += [(child, facts) for child in reversed(ast.children(node))]
    return out


def admissible_prefix(interp: Interpreter, contracts: list[ast.Expr]) -> tuple[int, object]:
    """How many contracts hold in order, and why the next one does not (False or an EvalError)."""
    for index, where in enumerate(contracts):
        try:
            holds = interp.eval(where)
        except EvalError as exc:
            return index, exc
        if holds is not True:
            return index, holds
    return len(contracts), None


def violates(ob: Obligation, result: object) -> bool:
    """Whether an evaluation's result (a value or an EvalError) breaks the obligation."""
    if ob.kind == DIVISOR:
        return isinstance(result, EvalError) and result.node is ob.node
    if not isinstance(result, Fraction):
        return False
    return result < 0 if ob.kind == NONNEG else result.denominator != 1


def guarded(divisor: ast.Expr, facts: tuple[tuple[ast.Expr, bool], ...]) -> bool:
    """A condition in force says `divisor != 0` (or `> 0`, `< 0`, ...) about this very
    expression.
    """
    stack = list(facts)
    while stack:
        cond, truth = stack.pop()
        if isinstance(cond, ast.Unary) and cond.op == "not":
            stack.append((cond.operand, not truth))
            continue
        if not isinstance(cond, ast.Binary):
            continue
        if cond.op in ("and", "or"):
            if truth == (cond.op == "and"):
                stack += [(cond.left, truth), (cond.right, truth)]
            continue
        if cond.op not in ast.COMPARISONS:
            continue
        op = cond.op if truth else _NEGATE[cond.op]
        for side, other, flip in ((cond.left, cond.right, False), (cond.right, cond.left, True)):
            if side != divisor or not isinstance(other, ast.Num):
                continue
            c = other.value
            op2 = _FLIP[op] if flip else op
            if (
                (op2 == "!=" and c == 0)
                or (op2 == "==" and c != 0)
                or (op2 == ">" and c >= 0)
                or (op2 == ">=" and c > 0)
                or (op2 == "<" and c <= 0)
                or (op2 == "<=" and c < 0)
            ):
                return True
    return False


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
