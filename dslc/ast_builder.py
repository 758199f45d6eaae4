"""The Lark transformer that builds frozen AST nodes as the LALR parser reduces, recording spans,
expression depth and literal-size `limit` diagnostics on the way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from fractions import Fraction
from typing import Protocol, TypeVar

import attrs
from lark import Token, Transformer, v_args

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

#: A node built below, bound to the kind it is (what `_expr` hands back).
E = TypeVar("E", bound=ast.Expr)
#: What a rule's children hold besides tokens.
N = TypeVar("N")


class Spanned(Protocol):
    """A node built here: it always carries its span (the AST's optional span is for nodes made
    in code)."""

    @property
    def span(self) -> Span | None: ...


def _span(item: Spanned) -> Span:
    span = item.span
    assert span is not None, "the builder gives every node a span"
    return span


def _start(item: Token | Spanned) -> tuple[int, int]:
    if isinstance(item, Token):
        return item.line or 1, item.column or 1
    span = _span(item)
    return span.line, span.column


def _end(item: Token | Spanned) -> tuple[int, int]:
    if isinstance(item, Token):
        return item.end_line or item.line or 1, item.end_column or (item.column or 1) + len(item)
    span = _span(item)
    return span.end_line, span.end_column


def _cover(first: Token | Spanned, last: Token | Spanned) -> Span:
    """The span from the start of `first` to the end of `last` (tokens or spanned nodes)."""
    line, column = _start(first)
    end_line, end_column = _end(last)
    return Span(PARSE_STATE.get().source, line, column, end_line, end_column)


def _tok(token: Token) -> Span:
    return token_span(PARSE_STATE.get().source, token)


def _nodes(children: Iterable[Token | N]) -> list[N]:
    return [c for c in children if not isinstance(c, Token)]


def _last_token(children: Sequence[Token | N]) -> Token:
    """The closing token of a rule whose children end with one (a bracket or a keyword)."""
    return next(c for c in reversed(children) if isinstance(c, Token))


def _expr(node: E, *kids: ast.Expr) -> E:
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


@attrs.frozen
class _Range:
    """A parameter's `in [lo, hi]` on its way to the parameter node (`end`: its `]`)."""

    lo: ast.Expr
    hi: ast.Expr
    end: Token


@attrs.frozen
class _Where:
    """A parameter's `where` condition on its way to the parameter node."""

    expr: ast.Expr


@attrs.frozen
class _Axis:
    """One probe axis on its way to the probe node: `NAME` or `NAME >= INT`."""

    name: Token
    minimum: int | None
    minimum_span: Span | None
    last: Token


@v_args(inline=True)
class AstBuilder(Transformer[Token, ast.Module]):
    """Builds frozen AST nodes as the LALR parser reduces (embedded: no parse tree, no
    recursion); each rule's children arrive as typed arguments (`v_args(inline=True)`).
    """

    def int_lit(self, token: Token) -> ast.Num:
        return _number(token, "integer")

    def decimal_lit(self, token: Token) -> ast.Num:
        return _number(token, "decimal")

    def true_lit(self, token: Token) -> ast.Bool:
        return _expr(ast.Bool(True, span=_tok(token)))

    def false_lit(self, token: Token) -> ast.Bool:
        return _expr(ast.Bool(False, span=_tok(token)))

    def inf_lit(self, token: Token) -> ast.Inf:
        return _expr(ast.Inf(span=_tok(token)))

    def name(self, token: Token) -> ast.Name:
        return _expr(ast.Name(str(token), span=_tok(token)))

    def group(self, _open: Token, inner: ast.Expr, _close: Token) -> ast.Expr:
        return _expr(inner, inner)  # parentheses count towards depth

    def list_lit(self, bracket: Token, *rest: Token | ast.Expr) -> ast.ListLit:
        items: tuple[ast.Expr, ...] = tuple(_nodes(rest))
        return _expr(ast.ListLit(items, span=_cover(bracket, _last_token(rest))), *items)

    def call(self, func: Token, *rest: Token | ast.Expr) -> ast.Call:
        args: tuple[ast.Expr, ...] = tuple(_nodes(rest))
        node = ast.Call(str(func), args, span=_cover(func, _last_token(rest)), func_span=_tok(func))
        return _expr(node, *args)

    def _binary(self, left: ast.Expr, token: Token, right: ast.Expr, op: str) -> ast.Binary:
        return _expr(
            ast.Binary(op, left, right, span=_cover(left, right), op_span=_tok(token)), left, right
        )

    def binop(self, left: ast.Expr, token: Token, right: ast.Expr) -> ast.Binary:
        return self._binary(left, token, right, _BINOPS[token.type])

    def pow(self, left: ast.Expr, token: Token, right: ast.Expr) -> ast.Binary:
        return self._binary(left, token, right, "**")

    def compare(self, left: ast.Expr, token: Token, right: ast.Expr) -> ast.Binary:
        return self._binary(left, token, right, str(token))

    def logic(self, left: ast.Expr, token: Token, right: ast.Expr) -> ast.Binary:
        return self._binary(left, token, right, str(token))

    def neg(self, token: Token, operand: ast.Expr) -> ast.Unary:
        return _expr(ast.Unary("-", operand, span=_cover(token, operand)), operand)

    def not_op(self, token: Token, operand: ast.Expr) -> ast.Unary:
        return _expr(ast.Unary("not", operand, span=_cover(token, operand)), operand)

    def if_expr(self, token: Token, cond: ast.Expr, then: ast.Expr, orelse: ast.Expr) -> ast.IfElse:
        return _expr(ast.IfElse(cond, then, orelse, span=_cover(token, orelse)), cond, then, orelse)

    # --- declarations --------------------------------------------------------------------
    def range(self, _open: Token, lo: ast.Expr, hi: ast.Expr, close: Token) -> _Range:
        return _Range(lo, hi, close)

    def where(self, expr: ast.Expr) -> _Where:
        return _Where(expr)

    def param_decl(
        self,
        keyword: Token,
        name: Token,
        type_name: Token,
        _eq: Token,
        default: ast.Expr,
        *rest: _Range | _Where,
    ) -> ast.Param:
        lo = hi = where = None
        last: Token | ast.Expr = default
        for item in rest:
            if isinstance(item, _Range):
                lo, hi, last = item.lo, item.hi, item.end
            else:
                where = last = item.expr
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

    def param_override(
        self, keyword: Token, name: Token, _eq: Token, default: ast.Expr
    ) -> ast.Param:
        return ast.Param(
            str(name), None, default, span=_cover(keyword, default), name_span=_tok(name)
        )

    def let_decl(self, keyword: Token, name: Token, _eq: Token, value: ast.Expr) -> ast.Let:
        return ast.Let(str(name), value, span=_cover(keyword, value), name_span=_tok(name))

    def assign_field(self, name: Token, _op: Token, value: ast.Expr) -> ast.Field:
        return ast.Field(str(name), "=", value, span=_cover(name, value), name_span=_tok(name))

    def measure_field(self, name: Token, _op: Token, value: ast.Expr) -> ast.Field:
        return ast.Field(str(name), "~", value, span=_cover(name, value), name_span=_tok(name))

    def use(self, component: Token, *rest: Token) -> ast.Use:
        method = rest[1] if len(rest) == 2 else None
        return ast.Use(
            str(component),
            str(method) if method is not None else None,
            span=_cover(component, rest[-1] if rest else component),
        )

    def uses(self, *children: Token | ast.Use) -> _Uses:
        return _Uses(tuple(_nodes(children)))

    def per_step(self, per: Token, step: Token) -> _PerStep:
        return _PerStep(_cover(per, step))

    def stage_decl(
        self, keyword: Token, name: Token, *rest: Token | _Uses | _PerStep | ast.Field
    ) -> ast.Stage:
        nodes = _nodes(rest)
        uses = next((n.items for n in nodes if isinstance(n, _Uses)), ())
        per_step = next((n.span for n in nodes if isinstance(n, _PerStep)), None)
        fields = tuple(n for n in nodes if isinstance(n, ast.Field))
        return ast.Stage(
            str(name),
            fields,
            uses,
            per_step is not None,
            span=_cover(keyword, _last_token(rest)),
            name_span=_tok(name),
            per_step_span=per_step,
        )

    def call_decl(self, keyword: Token, name: Token, _eq: Token, value: ast.Expr) -> ast.CallArg:
        return ast.CallArg(str(name), value, span=_cover(keyword, value), name_span=_tok(name))

    def probe_axis(self, name: Token, op: Token | None = None, value: Token | None = None) -> _Axis:
        """`NAME` or `NAME >= INT`: the name, the minimum, the minimum's span, the last item."""
        if op is None or value is None:
            return _Axis(name, None, None, name)
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
        return _Axis(name, int(number.value), span, value)

    def probe_decl(self, keyword: Token, *axes: _Axis) -> ast.Probe:
        minimums = tuple(axis.minimum for axis in axes)
        return ast.Probe(
            tuple(str(axis.name) for axis in axes),
            span=_cover(keyword, axes[-1].last),
            name_spans=tuple(_tok(axis.name) for axis in axes),
            minimums=minimums if any(m is not None for m in minimums) else (),
            minimum_spans=tuple(axis.minimum_span for axis in axes),
        )

    def pipeline(self, keyword: Token, *rest: Token | ast.Member) -> ast.Pipeline:
        names = [c for c in rest if isinstance(c, Token) and c.type == "NAME"]
        members: tuple[ast.Member, ...] = tuple(_nodes(rest))
        name = names[0]
        parent = names[1] if len(names) > 1 else None
        return ast.Pipeline(
            str(name),
            str(parent) if parent else None,
            members,
            span=_cover(keyword, _last_token(rest)),
            name_span=_tok(name),
            parent_span=_tok(parent) if parent else None,
        )

    def module(self, *children: Token | ast.Pipeline) -> ast.Module:
        return ast.Module(tuple(_nodes(children)))
