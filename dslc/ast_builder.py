"""The Lark transformer that builds frozen AST nodes as the LALR parser reduces, recording spans,
expression depth and literal-size `limit` diagnostics on the way.
"""

from __future__ import annotations

from contextvars import ContextVar
from fractions import Fraction
from typing import Any

import attrs
from lark import Token, Transformer

from dslc import ast
from dslc.codes import Code
from dslc.diagnostics import Diagnostic, error
from dslc.limits import MAX_DEPTH, MAX_LITERAL_DIGITS
from dslc.source import SourceFile, Span
from dslc.terminals import token_span

_BINOPS = {"PLUS": "+", "MINUS": "-", "STAR": "*", "SLASH": "/", "DSLASH": "//", "PERCENT": "%"}


@attrs.define
class ParseState:
    """What the embedded transformer needs during one parse (held in a ContextVar, not a global)."""

    source: SourceFile
    problems: list[Diagnostic] = attrs.field(factory=list)
    depth: dict[int, int] = attrs.field(factory=dict)


PARSE_STATE: ContextVar[ParseState] = ContextVar("dslc_parse_state")


def _start(item: Any) -> tuple[int, int]:
    if isinstance(item, Token):
        return item.line or 1, item.column or 1
    return item.span.line, item.span.column


def _end(item: Any) -> tuple[int, int]:
    if isinstance(item, Token):
        return item.end_line or item.line or 1, item.end_column or (item.column or 1) + len(item)
    return item.span.end_line, item.span.end_column


def _cover(first: Any, last: Any) -> Span:
    """The span from the start of `first` to the end of `last` (tokens or spanned nodes)."""
    line, column = _start(first)
    end_line, end_column = _end(last)
    return Span(PARSE_STATE.get().source, line, column, end_line, end_column)


def _tok(token: Token) -> Span:
    return token_span(PARSE_STATE.get().source, token)


def _nodes(children: list[Any]) -> list[Any]:
    return [c for c in children if not isinstance(c, Token)]


def _expr(node: Any, *kids: Any) -> Any:
    """Record the node's depth; the first node past MAX_DEPTH is a `limit` diagnostic."""
    state = PARSE_STATE.get()
    depth = 1 + max((state.depth.get(id(k), 1) for k in kids), default=0)
    state.depth[id(node)] = depth
    if depth == MAX_DEPTH + 1:
        state.problems.append(
            error(
                Code.LIMIT,
                f"expression nests deeper than {MAX_DEPTH} levels",
                node.span,
                hints=["name part of the expression with a 'let'"],
            )
        )
    return node


def _number(token: Token, kind: str) -> ast.Num:
    digits = token.value.replace("_", "")
    span = _tok(token)
    count = len(digits) - (kind == "decimal")
    if count > MAX_LITERAL_DIGITS:
        PARSE_STATE.get().problems.append(
            error(
                Code.LIMIT,
                f"{kind} literal has {count:,} digits; the limit is {MAX_LITERAL_DIGITS}",
                span,
            )
        )
        return _expr(ast.Num(Fraction(0), token.value[:20], span=span))
    value = Fraction(int(digits)) if kind == "integer" else Fraction(digits)
    return _expr(ast.Num(value, token.value, span=span))


@attrs.frozen
class _Uses:
    """A stage header's `uses` list on its way to the stage node."""

    items: tuple[ast.Use, ...]


@attrs.frozen
class _PerStep:
    """A stage header's `per step` on its way to the stage node."""

    span: Span


class AstBuilder(Transformer):
    """Builds frozen AST nodes as the LALR parser reduces (embedded: no parse tree, no
    recursion).
    """

    def int_lit(self, children: list[Token]) -> ast.Num:
        return _number(children[0], "integer")

    def decimal_lit(self, children: list[Token]) -> ast.Num:
        return _number(children[0], "decimal")

    def true_lit(self, children: list[Token]) -> ast.Bool:
        return _expr(ast.Bool(True, span=_tok(children[0])))

    def false_lit(self, children: list[Token]) -> ast.Bool:
        return _expr(ast.Bool(False, span=_tok(children[0])))

    def inf_lit(self, children: list[Token]) -> ast.Inf:
        return _expr(ast.Inf(span=_tok(children[0])))

    def name(self, children: list[Token]) -> ast.Name:
        return _expr(ast.Name(str(children[0]), span=_tok(children[0])))

    def group(self, children: list[Any]) -> Any:
        _, inner, _ = children
        return _expr(inner, inner)  # parentheses count towards depth

    def list_lit(self, children: list[Any]) -> ast.ListLit:
        items = tuple(_nodes(children))
        return _expr(ast.ListLit(items, span=_cover(children[0], children[-1])), *items)

    def call(self, children: list[Any]) -> ast.Call:
        func, args = children[0], tuple(_nodes(children))
        node = ast.Call(str(func), args, span=_cover(func, children[-1]), func_span=_tok(func))
        return _expr(node, *args)

    def _binary(self, children: list[Any], op: str) -> ast.Binary:
        left, token, right = children
        return _expr(
            ast.Binary(op, left, right, span=_cover(left, right), op_span=_tok(token)), left, right
        )

    def binop(self, children: list[Any]) -> ast.Binary:
        return self._binary(children, _BINOPS[children[1].type])

    def pow(self, children: list[Any]) -> ast.Binary:
        return self._binary(children, "**")

    def compare(self, children: list[Any]) -> ast.Binary:
        return self._binary(children, str(children[1]))

    def logic(self, children: list[Any]) -> ast.Binary:
        return self._binary(children, str(children[1]))

    def neg(self, children: list[Any]) -> ast.Unary:
        token, operand = children
        return _expr(ast.Unary("-", operand, span=_cover(token, operand)), operand)

    def not_op(self, children: list[Any]) -> ast.Unary:
        token, operand = children
        return _expr(ast.Unary("not", operand, span=_cover(token, operand)), operand)

    def if_expr(self, children: list[Any]) -> ast.IfElse:
        token, cond, then, orelse = children
        return _expr(ast.IfElse(cond, then, orelse, span=_cover(token, orelse)), cond, then, orelse)

    # --- declarations --------------------------------------------------------------------
    def range(self, children: list[Any]) -> tuple[str, Any, Any, Any]:
        lo, hi = _nodes(children)
        return ("range", lo, hi, children[-1])

    def where(self, children: list[Any]) -> tuple[str, Any, Any]:
        return ("where", children[0], children[0])

    def param_decl(self, children: list[Any]) -> ast.Param:
        keyword, name, type_name, _eq, default, *rest = children
        lo = hi = where = None
        last: Any = default
        for item in rest:
            if item[0] == "range":
                lo, hi = item[1], item[2]
            else:
                where = item[1]
            last = item[-1]
        return ast.Param(
            str(name),
            str(type_name),
            default,
            lo,
            hi,
            where,
            span=_cover(keyword, last),
            name_span=_tok(name),
            type_span=_tok(type_name),
        )

    def param_override(self, children: list[Any]) -> ast.Param:
        keyword, name, _eq, default = children
        return ast.Param(
            str(name), None, default, span=_cover(keyword, default), name_span=_tok(name)
        )

    def let_decl(self, children: list[Any]) -> ast.Let:
        keyword, name, _eq, value = children
        return ast.Let(str(name), value, span=_cover(keyword, value), name_span=_tok(name))

    def assign_field(self, children: list[Any]) -> ast.Field:
        name, _op, value = children
        return ast.Field(str(name), "=", value, span=_cover(name, value), name_span=_tok(name))

    def measure_field(self, children: list[Any]) -> ast.Field:
        name, _op, value = children
        return ast.Field(str(name), "~", value, span=_cover(name, value), name_span=_tok(name))

    def use(self, children: list[Token]) -> ast.Use:
        component, method = children[0], (children[2] if len(children) == 3 else None)
        return ast.Use(
            str(component),
            str(method) if method is not None else None,
            span=_cover(component, children[-1]),
        )

    def uses(self, children: list[Any]) -> _Uses:
        return _Uses(tuple(_nodes(children)))

    def per_step(self, children: list[Token]) -> _PerStep:
        return _PerStep(_cover(children[0], children[-1]))

    def stage_decl(self, children: list[Any]) -> ast.Stage:
        keyword, name = children[0], children[1]
        nodes = _nodes(children)
        uses = next((n.items for n in nodes if isinstance(n, _Uses)), ())
        per_step = next((n.span for n in nodes if isinstance(n, _PerStep)), None)
        fields = tuple(n for n in nodes if isinstance(n, ast.Field))
        return ast.Stage(
            str(name),
            fields,
            uses,
            per_step is not None,
            span=_cover(keyword, children[-1]),
            name_span=_tok(name),
            per_step_span=per_step,
        )

    def call_decl(self, children: list[Any]) -> ast.CallArg:
        keyword, name, _eq, value = children
        return ast.CallArg(str(name), value, span=_cover(keyword, value), name_span=_tok(name))

    def probe_axis(self, children: list[Any]) -> tuple[Token, int | None, Span | None, Any]:
        """`NAME` or `NAME >= INT`: (name, minimum, the minimum's span, the last item)."""
        if len(children) == 1:
            return children[0], None, None, children[0]
        name, op, value = children
        span = _cover(op, value)
        number = _number(value, "integer")
        if op.value != ">=":
            PARSE_STATE.get().problems.append(
                error(
                    Code.SYNTAX,
                    f"a probe axis takes a minimum as '{name} >= {value}', not '{op.value}'",
                    _tok(op),
                    hints=["a probe never goes below the minimum: write '>='"],
                )
            )
        return name, int(number.value), span, value

    def probe_decl(self, children: list[Any]) -> ast.Probe:
        axes = children[1:]
        minimums = tuple(axis[1] for axis in axes)
        return ast.Probe(
            tuple(str(axis[0]) for axis in axes),
            span=_cover(children[0], axes[-1][3]),
            name_spans=tuple(_tok(axis[0]) for axis in axes),
            minimums=minimums if any(m is not None for m in minimums) else (),
            minimum_spans=tuple(axis[2] for axis in axes),
        )

    def pipeline(self, children: list[Any]) -> ast.Pipeline:
        names = [c for c in children if isinstance(c, Token) and c.type == "NAME"]
        members = tuple(_nodes(children))
        name = names[0]
        parent = names[1] if len(names) > 1 else None
        return ast.Pipeline(
            str(name),
            str(parent) if parent else None,
            members,
            span=_cover(children[0], children[-1]),
            name_span=_tok(name),
            parent_span=_tok(parent) if parent else None,
        )

    def module(self, children: list[Any]) -> ast.Module:
        return ast.Module(tuple(_nodes(children)))
