"""Canonical formatting: AST plus comments back to text; idempotent and meaning-preserving.

`format_expr` prints an expression with the fewest parentheses the grammar needs (so the
output never nests deeper than the source did and stays within the parser's limits).
`format_module` lays out pipelines, members and stages and puts every `#` comment back:
an own-line comment before the construct that follows it, a trailing comment at the end of
the line of the construct that ends on its line. At most one blank line survives wherever
the source had one or more. A built node (one added to a parsed tree, or a tree built whole)
brings its own comments in its `ast.Trivia`; they print first, and a container's source comments
after its last parsed child stay there, above the built children that follow.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from fractions import Fraction

from dslc import ast
from dslc.parse import parse
from dslc.source import SourceFile

__all__ = ["format_expr", "format_module", "format_source"]

INDENT = 4
LINE_WIDTH = 100

# Precedence levels, loosest first.
_IF, _OR, _AND, _NOT, _CMP, _SUM, _PRODUCT, _NEG, _POW, _ATOM = range(10)

# op -> (level of the node, least level of the left operand, least level of the right operand)
_BINARY = {
    "or": (_OR, _OR, _AND),
    "and": (_AND, _AND, _NOT),
    **{op: (_CMP, _SUM, _SUM) for op in ast.COMPARISONS},  # comparisons never chain
    "+": (_SUM, _SUM, _PRODUCT),
    "-": (_SUM, _SUM, _PRODUCT),
    **{op: (_PRODUCT, _PRODUCT, _NEG) for op in ("*", "/", "//", "%")},
    "**": (_POW, _ATOM, _NEG),  # power: atom POW unary
}


_LITERAL = re.compile(r"[0-9](_?[0-9])*(\.[0-9](_?[0-9])*)?")  # INT or DECIMAL of the grammar


# --- expressions -----------------------------------------------------------------------------


def format_expr(expr: ast.Expr) -> str:
    """An expression as source text, e.g. `frames % 4 == 1`."""
    return _operand(expr, _IF)


def _operand(expr: ast.Expr, least: int) -> str:
    text, level = _render(expr)
    return f"({text})" if level < least else text


def _render(expr: ast.Expr) -> tuple[str, int]:
    if isinstance(expr, ast.Num):
        text = _number(expr.value, expr.text)
        return text, _NEG if text.startswith("-") else _ATOM
    if isinstance(expr, ast.Bool):
        return ("true" if expr.value else "false"), _ATOM
    if isinstance(expr, ast.Inf):
        return "inf", _ATOM
    if isinstance(expr, ast.Name):
        return expr.id, _ATOM
    if isinstance(expr, ast.ListLit):
        return "[" + ", ".join(format_expr(item) for item in expr.items) + "]", _ATOM
    if isinstance(expr, ast.Call):
        return expr.func + "(" + ", ".join(format_expr(arg) for arg in expr.args) + ")", _ATOM
    if isinstance(expr, ast.Unary) and expr.op == "-":
        operand = _operand(expr.operand, _NEG)
        return "-" + (" " if operand.startswith("-") else "") + operand, _NEG
    if isinstance(expr, ast.Unary) and expr.op == "not":
        return "not " + _operand(expr.operand, _NOT), _NOT
    if isinstance(expr, ast.Binary) and expr.op in _BINARY:
        level, left, right = _BINARY[expr.op]
        return f"{_operand(expr.left, left)} {expr.op} {_operand(expr.right, right)}", level
    if isinstance(expr, ast.IfElse):
        return (
            f"if {format_expr(expr.cond)} then {format_expr(expr.then)} "
            f"else {format_expr(expr.orelse)}"
        ), _IF
    raise TypeError(f"cannot format {expr!r}")


def _number(value: Fraction, text: str = "") -> str:
    """The author's spelling when it still denotes `value`, else a canonical one."""
    if text and _LITERAL.fullmatch(text):
        try:
            if Fraction(text.replace("_", "")) == value:
                return text
        except (ValueError, ZeroDivisionError):
            pass
    if value.denominator == 1:
        return str(value.numerator)
    rest, twos, fives = value.denominator, 0, 0
    while rest % 2 == 0:
        rest, twos = rest // 2, twos + 1
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    if rest != 1:
        return f"({value.numerator} / {value.denominator})"
    places = max(twos, fives)
    digits = str(abs(value.numerator) * 10**places // value.denominator).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


# --- declarations ----------------------------------------------------------------------------


def _param(param: ast.Param) -> str:
    if param.type is None:
        return f"param {param.name} = {format_expr(param.default)}"
    text = f"param {param.name}: {param.type} = {format_expr(param.default)}"
    if param.lo is not None and param.hi is not None:
        text += f" in [{format_expr(param.lo)}, {format_expr(param.hi)}]"
    if param.where is not None:
        text += f" where {format_expr(param.where)}"
    return text


def _field(field: ast.Field) -> str:
    return f"{field.name} {field.op} {format_expr(field.value)}"


def _simple(node: ast.Param | ast.Let | ast.Field | ast.CallArg | ast.Probe) -> str:
    if isinstance(node, ast.Param):
        return _param(node)
    if isinstance(node, ast.Let):
        return f"let {node.name} = {format_expr(node.value)}"
    if isinstance(node, ast.CallArg):
        return f"call {node.arg} = {format_expr(node.value)}"
    if isinstance(node, ast.Probe):
        return "probe " + ", ".join(
            name if node.minimum(i) is None else f"{name} >= {node.minimum(i)}"
            for i, name in enumerate(node.names)
        )
    return _field(node)


def _stage_header(stage: ast.Stage) -> str:
    """`stage NAME uses a, b.m per step`: the name and the header's facts."""
    text = f"stage {stage.name}"
    if stage.uses:
        text += " uses " + ", ".join(use.text for use in stage.uses)
    return text + (" per step" if stage.per_step else "")


def _one_line_stage(stage: ast.Stage) -> str:
    if not stage.fields:
        return f"{_stage_header(stage)} {{}}"
    return f"{_stage_header(stage)} {{ " + "; ".join(_field(f) for f in stage.fields) + " }"


# --- layout and comments ---------------------------------------------------------------------

Container = ast.Module | ast.Pipeline | ast.Stage
Item = ast.Pipeline | ast.Param | ast.Let | ast.Stage | ast.Field | ast.CallArg | ast.Probe


def _lines(node: object) -> tuple[int, int] | None:
    span = getattr(node, "span", None)
    return (span.line, span.end_line) if span is not None else None


_NO_TRIVIA = ast.Trivia()


def _trivia(node: object) -> ast.Trivia:
    return getattr(node, "trivia", None) or _NO_TRIVIA


def _lead(out: list[str], lines: tuple[str, ...], indent: str, top: int) -> None:
    """A built node's lines above it; a blank line only below a line printed since `top`."""
    for line in lines:
        if line:
            out.append(indent + line)
        elif len(out) > top and out[-1]:
            out.append("")


class _Printer:
    """Places each comment in a slot, then prints the module slot by slot."""

    def __init__(self, module: ast.Module):
        self.module = module
        text = module.source.text if module.source is not None else ""
        raw_lines = text.split("\n") if module.source is not None else []  # as Lark counts lines
        self.blank_prefix = [0]
        for line in raw_lines:
            self.blank_prefix.append(self.blank_prefix[-1] + (not line.strip()))
        self.comments = _comments(module, raw_lines)
        self.comment_lines = [c.line for c in self.comments]
        self._indexes: dict[int, tuple[list[int], list[tuple[int, int]], list[Item]]] = {}
        self.lead: dict[int, list[ast.Comment]] = {}
        self.trail: dict[int, list[ast.Comment]] = {}
        self.head: dict[int, list[ast.Comment]] = {}
        self.close_lead: dict[int, list[ast.Comment]] = {}
        self.close_trail: dict[int, list[ast.Comment]] = {}
        self.block_stages: set[int] = set()
        for pipeline in module.pipelines:
            for member in pipeline.members:
                if isinstance(member, ast.Stage) and not self._fits_one_line(member):
                    self.block_stages.add(id(member))
        for comment in self.comments:
            self._place(module, comment)

    # -- placement --
    def _fits_one_line(self, stage: ast.Stage) -> bool:
        if len(stage.fields) > 1 or _trivia(stage).close:
            return False
        if any(_trivia(f).lead or _trivia(f).trail for f in stage.fields):
            return False
        lines = _lines(stage)
        at = self.comment_lines
        if lines and bisect_left(at, lines[0]) < bisect_left(at, lines[1]):
            return False  # a comment inside keeps the block
        return INDENT + len(_one_line_stage(stage)) <= LINE_WIDTH

    def _children(self, container: Container) -> tuple[Item, ...]:
        if isinstance(container, ast.Module):
            return container.pipelines
        if isinstance(container, ast.Pipeline):
            return container.members
        return container.fields

    def _index(self, container: Container) -> tuple[list[int], list[tuple[int, int]], list[Item]]:
        """The children that have spans: their first lines, line ranges, and themselves."""
        found = self._indexes.get(id(container))
        if found is None:
            pairs = [(lines, item) for item in self._children(container) if (lines := _lines(item))]
            found = (
                [lines[0] for lines, _ in pairs],
                [lines for lines, _ in pairs],
                [item for _, item in pairs],
            )
            self._indexes[id(container)] = found
        return found

    def _is_container(self, item: Item) -> bool:
        return isinstance(item, ast.Pipeline) or id(item) in self.block_stages

    def _place(self, container: Container, comment: ast.Comment) -> None:
        line = comment.line
        starts, ranges, items = self._index(container)
        last = bisect_right(starts, line) - 1  # children do not overlap beyond a shared line
        if last >= 0 and ranges[last][1] >= line:
            item = items[last]
            if self._is_container(item):
                self._place(item, comment)  # type: ignore[arg-type]
            elif not comment.own_line and ranges[last][1] == line:
                self.trail.setdefault(id(item), []).append(comment)
            else:  # inside a multi-line expression: move it above the member
                self.lead.setdefault(id(item), []).append(comment)
            return
        lines = None if isinstance(container, ast.Module) else _lines(container)
        if lines and not comment.own_line and line == lines[0]:
            self.head.setdefault(id(container), []).append(comment)
        elif lines and not comment.own_line and line == lines[1]:
            self.close_trail.setdefault(id(container), []).append(comment)
        elif last + 1 < len(items):
            self.lead.setdefault(id(items[last + 1]), []).append(comment)
        else:
            self.close_lead.setdefault(id(container), []).append(comment)

    # -- printing --
    def _blank(self, after: int, before: int) -> bool:
        """Whether the source has a blank line strictly between lines `after` and `before`."""
        if before - after < 2:
            return False
        top = min(before - 1, len(self.blank_prefix) - 1)
        return top > after and self.blank_prefix[top] - self.blank_prefix[after] > 0

    def _comment_block(
        self, out: list[str], comments: list[ast.Comment], indent: str, before: int | None
    ) -> None:
        """Own-line comments before line `before`; a blank line kept where the source had one.

        Comments from inside a multi-line member (at or after `before`) follow, without blanks.
        """
        ordered = sorted(comments, key=lambda c: c.line)
        above = [c for c in ordered if before is None or c.line < before]
        last = None
        for comment in above:
            if last is not None and self._blank(last, comment.line):
                out.append("")
            out.append(indent + comment.text)
            last = comment.line
        if last is not None and before is not None and self._blank(last, before):
            out.append("")
        out.extend(indent + c.text for c in ordered[len(above) :])

    def _chunk_start(self, item: Item) -> int | None:
        lines = _lines(item)
        starts = [c.line for c in self.lead.get(id(item), ())]
        if lines:
            starts = [s for s in starts if s < lines[0]] + [lines[0]]
        return min(starts) if starts else None

    @staticmethod
    def _with_trailing(text: str, *groups: list[ast.Comment] | None) -> str:
        tails = [c.text for group in groups if group for c in sorted(group, key=lambda c: c.line)]
        return "  ".join([text, *tails]) if tails else text

    def _body(self, out: list[str], container: ast.Pipeline | ast.Stage, depth: int) -> None:
        indent = " " * (INDENT * depth)
        prev_end, top = None, len(out)
        children = self._children(container)
        parsed = max((i for i, item in enumerate(children) if _lines(item)), default=-1)
        for index, item in enumerate(children):
            if index == parsed + 1:
                self._close_lead(out, container, prev_end, indent)
            start = self._chunk_start(item)
            if prev_end is not None and start is not None and self._blank(prev_end, start):
                out.append("")
            lines = _lines(item)
            _lead(out, _trivia(item).lead, indent, top)
            self._comment_block(out, self.lead.get(id(item), []), indent, lines and lines[0])
            self._item(out, item, depth)
            prev_end = lines[1] if lines else None
        if parsed + 1 == len(children):
            self._close_lead(out, container, prev_end, indent)
        _lead(out, _trivia(container).close, indent, top)

    def _close_lead(
        self, out: list[str], container: Container, prev_end: int | None, indent: str
    ) -> None:
        """The source's comments after the container's last parsed child."""
        leads = self.close_lead.get(id(container), [])
        if leads:
            first = min(c.line for c in leads)
            if prev_end is not None and self._blank(prev_end, first):
                out.append("")
            self._comment_block(out, leads, indent, None)

    def _item(self, out: list[str], item: Item, depth: int) -> None:
        indent = " " * (INDENT * depth)
        trailing = self.trail.get(id(item))
        built = _trivia(item).trail
        own = [ast.Comment(built, 0, own_line=False)] if built else None
        if isinstance(item, ast.Stage) and not self._is_container(item):
            out.append(self._with_trailing(indent + _one_line_stage(item), trailing, own))
        elif isinstance(item, (ast.Stage, ast.Pipeline)):
            self._block(out, item, depth)
        else:
            out.append(self._with_trailing(indent + _simple(item), trailing, own))

    def _block(self, out: list[str], block: ast.Pipeline | ast.Stage, depth: int) -> None:
        indent = " " * (INDENT * depth)
        if isinstance(block, ast.Pipeline):
            header = f"pipeline {block.name}" + (f" extends {block.parent}" if block.parent else "")
            empty = not block.members
        else:
            header = _stage_header(block)
            empty = not block.fields
        empty = empty and not _trivia(block).close
        key = id(block)
        # `{}` on one line, unless that would put two trailing comments on it.
        head, close_trail = self.head.get(key), self.close_trail.get(key)
        if empty and not self.close_lead.get(key) and not (head and close_trail):
            out.append(
                self._with_trailing(
                    f"{indent}{header} {{}}", self.head.get(key), self.close_trail.get(key)
                )
            )
            return
        out.append(self._with_trailing(f"{indent}{header} {{", self.head.get(key)))
        self._body(out, block, depth + 1)
        out.append(self._with_trailing(indent + "}", self.close_trail.get(key)))

    def render(self) -> str:
        out: list[str] = []
        prev_end = None
        for index, pipeline in enumerate(self.module.pipelines):
            if index:
                out.append("")
            lines = _lines(pipeline)
            _lead(out, _trivia(pipeline).lead, "", 0)
            self._comment_block(out, self.lead.get(id(pipeline), []), "", lines and lines[0])
            self._block(out, pipeline, 0)
            prev_end = lines[1] if lines else None
        tail = self.close_lead.get(id(self.module), [])
        if tail:
            if prev_end is not None and self._blank(prev_end, min(c.line for c in tail)):
                out.append("")
            self._comment_block(out, tail, "", None)
        return "".join(line.rstrip() + "\n" for line in out)


def _comments(module: ast.Module, raw_lines: list[str]) -> list[ast.Comment]:
    """Every comment, numbered as the parser numbers lines (by '\\n' alone)."""
    if module.source is None:
        return sorted(module.comments, key=lambda c: c.line)
    found = []
    for number, line in enumerate(raw_lines, start=1):
        index = line.find("#")
        if index >= 0:
            own_line = not line[:index].strip()
            found.append(ast.Comment(line[index:].rstrip(), number, own_line=own_line))
    return found


def format_module(module: ast.Module) -> str:
    """The canonical text of a parsed module, comments included ('' for an empty one)."""
    return _Printer(module).render()


def format_source(source: SourceFile) -> str:
    """Parse, then format; raises CompileError when the text does not parse."""
    return format_module(parse(source))
