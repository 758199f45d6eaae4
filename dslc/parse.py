"""Text to AST: Lark (LALR, strict, positions) plus the one door where every parser error becomes a
diagnostic.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from fractions import Fraction
from importlib import resources
from typing import Any, cast

import attrs
import lark
from lark import Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from dslc import ast
from dslc.diagnostics import CompileError, Diagnostic, error
from dslc.limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_LITERAL_DIGITS, MAX_NESTING, MAX_TOKENS
from dslc.source import SourceFile, Span

# Human names for terminals, so no message ever says `$END` or `_RBRACE`.
TERMINAL_NAMES = {
    "$END": "end of input",
    "NAME": "a name",
    "INT": "a number",
    "DECIMAL": "a number",
    "_SEP": "a newline or ';'",
    "NEWLINE": "a newline",
    "SEMI": "';'",
    "CMPOP": "a comparison",
    "POW": "'**'",
    "DSLASH": "'//'",
    "STAR": "'*'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "TILDE": "'~'",
    "EQ": "'='",
    "_COLON": "':'",
    "_COMMA": "','",
    "DOT": "'.'",
    "LPAR": "'('",
    "RPAR": "')'",
    "LBRACK": "'['",
    "RBRACK": "']'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
}
KEYWORDS = (
    "pipeline",
    "extends",
    "param",
    "let",
    "stage",
    "in",
    "where",
    "if",
    "then",
    "else",
    "and",
    "or",
    "not",
    "true",
    "false",
    "inf",
    "call",
    "probe",
    "uses",
    "per",
    "step",
)
for _kw in KEYWORDS:
    TERMINAL_NAMES[_kw.upper()] = f"'{_kw}'"
    TERMINAL_NAMES["_" + _kw.upper()] = f"'{_kw}'"
# Lists of expected terminals that deserve a shorter phrase.
_EXPRESSION_START = {"INT", "DECIMAL", "NAME", "MINUS", "LPAR", "LBRACK", "TRUE", "FALSE", "INF"}


class _LimitHit(Exception):
    def __init__(self, message: str, token: Token):
        self.message, self.token = message, token


class _Separators(lark.lark.PostLex):
    """Newlines and ';' separate members: merge runs into one _SEP, drop newlines inside (...) and
    [...].
    """

    always_accept = ("NEWLINE", "SEMI")

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        # No look-ahead buffering: the contextual lexer lexes each token in the parser state
        # reached after the previous one, so a separator is yielded at once and repeats dropped.
        depth = 0
        after_separator = False
        for token in stream:
            kind = token.type
            if kind in ("NEWLINE", "SEMI"):
                if (depth and kind == "NEWLINE") or after_separator:
                    continue
                after_separator = True
                yield Token.new_borrow_pos("_SEP", token.value, token)
                continue
            after_separator = False
            if kind in ("LPAR", "LBRACK"):
                depth += 1
                if depth > MAX_NESTING:
                    raise _LimitHit(f"brackets nest deeper than {MAX_NESTING} levels", token)
            elif kind in ("RPAR", "RBRACK") and depth:
                depth -= 1
            yield token


@functools.cache
def _parser() -> lark.Lark:
    """The LALR parser, built once per process (it holds no per-parse state)."""
    grammar = resources.files("dslc.grammar").joinpath("workload.lark").read_text()
    return lark.Lark(
        grammar,
        start="module",
        parser="lalr",
        lexer="contextual",
        strict=True,
        maybe_placeholders=False,
        postlex=_Separators(),
        transformer=_AstBuilder(),
    )


def _token_span(source: SourceFile, token: Token) -> Span:
    line, column = token.line or 1, token.column or 1
    end_line = token.end_line or line
    end_column = token.end_column or column + max(1, len(str(token)))
    if token.type in ("_SEP", "NEWLINE") or token.type == "$END":
        end_line, end_column = line, column + 1
    return Span(source, line, column, end_line, end_column)


_OPERATORS = {
    "PLUS",
    "MINUS",
    "STAR",
    "SLASH",
    "DSLASH",
    "PERCENT",
    "POW",
    "CMPOP",
    "AND",
    "OR",
    "LPAR",
}


def _describe_expected(expected: set[str]) -> str:
    expected = set(expected)
    groups = []
    if _EXPRESSION_START <= expected:
        expected -= _EXPRESSION_START
        groups.append("an expression")
    elif len(expected & _OPERATORS) >= 3:
        expected -= _OPERATORS
        groups.append("an operator")
    names = groups + sorted({TERMINAL_NAMES.get(t, t.lower()) for t in expected})
    if len(names) > 6:
        names = names[:6] + ["..."]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + (", or " if len(names) > 2 else " or ") + names[-1]


def _describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of input"
    if token.type in ("_SEP", "NEWLINE"):
        return "end of line" if token.value.strip() != ";" else "';'"
    return f"'{token.value}'"


_HINT_CHARACTERS = {
    "&": "use 'and' for logical and",
    "|": "use 'or' for logical or",
    "!": "use 'not' for negation and '!=' for inequality",
    "^": "use '**' for powers",
    '"': "the language has no strings; names and numbers only",
    "'": "the language has no strings; names and numbers only",
}


def _syntax_diagnostic(source: SourceFile, exc: UnexpectedInput) -> Diagnostic:
    hints: list[str] = []
    if isinstance(exc, UnexpectedCharacters):
        offset = exc.pos_in_stream or 0
        char = source.text[offset] if offset < len(source.text) else ""
        span = source.span(offset, offset + 1)
        shown = (
            repr(char)[1:-1]
            if char.isprintable()
            else f"\\x{ord(char):02x}"
            if ord(char) < 256
            else repr(char)
        )
        message = f"unexpected character '{shown}'"
        if char in _HINT_CHARACTERS:
            hints.append(_HINT_CHARACTERS[char])
        return error("syntax", message, span, hints=hints)
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        expected = set(exc.accepts or exc.expected)
        span = _token_span(source, token)
        message = f"unexpected {_describe_token(token)}"
        if expected:
            message += f"; expected {_describe_expected(expected)}"
        if token.type == "CMPOP" and "CMPOP" not in expected:
            hints.append("comparisons do not chain; write 'a < b and b < c'")
        if token.type == "EQ" and "CMPOP" in expected:
            hints.append("use '==' to compare")
        if token.type == "NAME" and token.value in ("int", "bool") and "_COLON" in expected:
            hints.append(f"a param's type follows a colon: 'param NAME: {token.value} = ...'")
        if token.type == "USES" and "LBRACE" in expected:
            hints.append("a stage header lists 'uses' before 'per step'")
        if token.type == "_SEP" and expected == {"RBRACE"}:
            hints.append("a block ends with '}'")
        return error("syntax", message, span, hints=hints)
    if isinstance(exc, UnexpectedEOF):
        end = len(source.text)
        return error(
            "syntax",
            f"unexpected end of input; expected {_describe_expected(set(exc.expected))}",
            source.span(end, end),
        )
    return error("syntax", "the text does not parse", source.span(0, 0))


def parse(source: SourceFile) -> ast.Module:
    """Parse one file; raise CompileError with diagnostics on anything malformed."""
    size = len(source.text.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        raise CompileError(
            [
                error(
                    "limit",
                    f"file is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}",
                    source.span(0, 0),
                    hints=["split the pipelines across several files"],
                )
            ]
        )
    bad = re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]", source.text)
    if bad:
        char = bad.group()
        raise CompileError(
            [
                error(
                    "syntax",
                    f"unexpected character '\\x{ord(char):02x}'"
                    if ord(char) < 256
                    else "the file is not valid UTF-8 text",
                    source.span(bad.start(), bad.start() + 1),
                    hints=["is this a binary file?"],
                )
            ]
        )
    tokens = _count_tokens(source.text)
    if tokens > MAX_TOKENS:
        raise CompileError(
            [
                error(
                    "limit",
                    f"file has over {MAX_TOKENS:,} tokens (newlines count); the limit is "
                    f"{MAX_TOKENS:,}",
                    source.span(0, 0),
                    hints=["split the pipelines across several files"],
                )
            ]
        )
    state = _ParseState(source)
    token = _STATE.set(state)
    try:
        module = cast(ast.Module, _parser().parse(source.text))  # the embedded transformer's result
    except _LimitHit as hit:
        raise CompileError(
            [
                error(
                    "limit",
                    hit.message,
                    _token_span(source, hit.token),
                    hints=["name part of the expression with a 'let'"],
                )
            ]
        ) from None
    except UnexpectedInput as exc:
        from dslc.recover import recover

        first = _syntax_diagnostic(source, exc)
        raise CompileError(
            recover(source, first, _offset(source, exc), _reparser(source), tokens)
        ) from None
    finally:
        _STATE.reset(token)
    if state.problems:
        raise CompileError(state.problems)
    return ast.Module(module.pipelines, source, tuple(_comments(source)))


def _offset(source: SourceFile, exc: UnexpectedInput) -> int:
    """Where in the text the parser gave up."""
    if isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
        return exc.token.start_pos or 0
    if isinstance(exc, UnexpectedCharacters):
        return exc.pos_in_stream or 0
    return len(source.text)


def _reparser(source: SourceFile) -> Callable[[str], tuple[Diagnostic, int] | None]:
    """Parse a repaired copy of `source` (same length, same lines): its first error, or None."""

    def reparse(text: str) -> tuple[Diagnostic, int] | None:
        repaired = SourceFile(source.name, text)
        token = _STATE.set(_ParseState(repaired))
        try:
            _parser().parse(text)
        except _LimitHit:
            return None
        except UnexpectedInput as exc:
            return _syntax_diagnostic(source, exc), _offset(repaired, exc)
        finally:
            _STATE.reset(token)
        return None

    return reparse


_TOKEN = re.compile(r"#[^\r\n]*|[A-Za-z_0-9.]+|\*\*|//|[=!<>]=|[^\s]|\n")


def _count_tokens(text: str) -> int:
    """A cheap upper-bound-ish token count (comments excluded, newlines included: a flood of blank
    lines costs the lexer as much as tokens do), taken before Lark sees the text; it stops one past
    the limit, so a huge file costs no more than a file at the limit."""
    count = 0
    for match in _TOKEN.finditer(text):
        if not match.group().startswith("#"):
            count += 1
            if count > MAX_TOKENS:
                break
    return count


def parse_text(text: str, name: str = "<string>") -> ast.Module:
    return parse(SourceFile(name, text))


def _comments(source: SourceFile) -> Iterator[ast.Comment]:
    for number, line in enumerate(source.text.split("\n"), start=1):
        index = line.find("#")
        if index >= 0:
            yield ast.Comment(line[index:].rstrip(), number, own_line=not line[:index].strip())


_BINOPS = {"PLUS": "+", "MINUS": "-", "STAR": "*", "SLASH": "/", "DSLASH": "//", "PERCENT": "%"}


@attrs.define
class _ParseState:
    """What the embedded transformer needs during one parse (held in a ContextVar, not a global)."""

    source: SourceFile
    problems: list[Diagnostic] = attrs.field(factory=list)
    depth: dict[int, int] = attrs.field(factory=dict)


_STATE: ContextVar[_ParseState] = ContextVar("dslc_parse_state")


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
    return Span(_STATE.get().source, line, column, end_line, end_column)


def _tok(token: Token) -> Span:
    return _token_span(_STATE.get().source, token)


def _nodes(children: list[Any]) -> list[Any]:
    return [c for c in children if not isinstance(c, Token)]


def _expr(node: Any, *kids: Any) -> Any:
    """Record the node's depth; the first node past MAX_DEPTH is a `limit` diagnostic."""
    state = _STATE.get()
    depth = 1 + max((state.depth.get(id(k), 1) for k in kids), default=0)
    state.depth[id(node)] = depth
    if depth == MAX_DEPTH + 1:
        state.problems.append(
            error(
                "limit",
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
        _STATE.get().problems.append(
            error(
                "limit",
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


class _AstBuilder(Transformer):
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

    def probe_decl(self, children: list[Any]) -> ast.Probe:
        names = children[1:]
        return ast.Probe(
            tuple(str(n) for n in names),
            span=_cover(children[0], names[-1]),
            name_spans=tuple(_tok(n) for n in names),
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
