"""Syntax error recovery: every independent syntax error of a file, unclosed braces by name.

Lark's LALR parser stops at the first error. When it does, a cheap bracket-aware scan of the text
(no grammar: it knows only braces, separators and the keywords that start a pipeline, a stage or
a pipeline member) finds blocks left open and the statement the error sits in. That statement (a
stage member, a pipeline member, or a whole block whose header is broken) is blanked out, keeping
every newline so later positions do not move, and the file is parsed again, until it parses or a
bound is reached (MAX_SYNTAX_ERRORS errors, RECOVERY_TOKENS tokens parsed in all).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import attrs

from dslc.codes import Code
from dslc.diagnostics import Diagnostic, Note, error
from dslc.limits import MAX_TOKENS
from dslc.source import SourceFile, Span

MAX_SYNTAX_ERRORS = 20  # per file; the rest show once these are fixed
# Tokens of the file times re-parses, while recovering one file. A re-parse starts, in effect, at
# the error (the parsed prefix is blanked), so this bounds the re-lexing of that prefix.
RECOVERY_TOKENS = 4 * MAX_TOKENS

# Comments, separators, brackets, words; any other run of characters is one token.
_TOKEN = re.compile(r"#[^\n]*|\n|;|[{}()\[\]]|[A-Za-z_][A-Za-z0-9_]*|[^\sA-Za-z_{}()\[\];#]+")
# A statement starting with a pipeline member's keyword cannot be inside a stage: it closes the
# stage (`call` and `probe` too, contextual keywords of newer members); `pipeline` closes anything.
_PIPELINE_MEMBERS = ("param", "let", "stage", "call", "probe")


@attrs.frozen
class Block:
    """A `{ ... }` block: a pipeline's, a stage's, or another ("block") one."""

    kind: str
    name: str | None
    start: int  # offset of the statement that opens it (its keyword)
    opened: int  # offset of its '{'
    closed: int | None  # offset of its '}'; None when it is never closed
    ended: int  # where it ends: its '}', or the token that cannot be inside it, or the end


@attrs.frozen
class Statement:
    """One member or field: from its first token to the separator, brace or end after it."""

    start: int
    end: int
    block: int  # index of the innermost enclosing block in `Scan.blocks`; -1 at top level
    opens: int | None = None  # index of the block this statement's header opens, if any


@attrs.frozen
class Scan:
    blocks: tuple[Block, ...]
    statements: tuple[Statement, ...]


@attrs.define
class _Open:
    kind: str
    name: str | None
    start: int
    opened: int
    index: int


def scan(text: str) -> Scan:
    """The blocks and statements of `text`; a block closes where a statement cannot be inside it."""
    scanner = _Scanner()
    for match in _TOKEN.finditer(text):
        scanner.feed(match.group(), match.start())
    scanner.finish(len(text))
    while scanner.stack:
        scanner.close(scanner.stack.pop(), None, len(text))
    return Scan(tuple(b for b in scanner.blocks if b is not None), tuple(scanner.statements))


@attrs.define
class _Scanner:
    """The state of `scan` between tokens: blocks open and found, the statement being read."""

    blocks: list[Block | None] = attrs.Factory(list)
    statements: list[Statement] = attrs.Factory(list)
    stack: list[_Open] = attrs.Factory(list)
    words: list[str] = attrs.Factory(list)  # the current statement's first two words
    start: int | None = None  # offset of the current statement's first token
    depth: int = 0  # parentheses and brackets
    line_start: bool = False  # only newlines since the last statement's token

    def finish(self, end: int, opens: int | None = None) -> None:
        """End the current statement (if any) at `end`."""
        if self.start is not None:
            block = self.stack[-1].index if self.stack else -1
            self.statements.append(Statement(self.start, end, block, opens))
        self.start = None
        self.words.clear()

    def close(self, block: _Open, closed: int | None, ended: int) -> None:
        self.blocks[block.index] = Block(
            block.kind, block.name, block.start, block.opened, closed, ended
        )

    def feed(self, token: str, offset: int) -> None:
        """One token of the text: separators end statements, braces open and close blocks."""
        if token.startswith("#"):
            return
        if token == ";" or (token == "\n" and not self.depth):
            self.finish(offset)
            return
        if token == "\n":
            self.line_start = True
            return
        if self.depth and self.line_start and token in ("pipeline", *_PIPELINE_MEMBERS):
            self.finish(offset)  # a bracket left open: the statement ended at the line before
            self.depth = 0
        self.line_start = False
        if token == "}":
            self.finish(offset)
            if self.stack:
                self.close(self.stack.pop(), offset, offset)
            self.depth = 0
            return
        if token in "([":
            self.depth += 1
        elif token in ")]":
            self.depth = max(0, self.depth - 1)
        if self.start is None:
            self._begin(token, offset)
        if (token[0].isalpha() or token[0] == "_") and len(self.words) < 2:
            self.words.append(token)
        if token == "{":
            self._open(offset)

    def _begin(self, token: str, offset: int) -> None:
        """A statement starts: `pipeline` closes every block, a pipeline member a stage."""
        self.start = offset
        if token == "pipeline":
            while self.stack:
                self.close(self.stack.pop(), None, offset)
        elif token in _PIPELINE_MEMBERS and self.stack and self.stack[-1].kind == "stage":
            self.close(self.stack.pop(), None, offset)

    def _open(self, offset: int) -> None:
        """A `{`: the statement so far is the header of a block named by its first two words."""
        words = self.words
        kind = words[0] if words and words[0] in ("pipeline", "stage") else "block"
        name = words[1] if kind != "block" and len(words) > 1 else None
        index = len(self.blocks)
        self.blocks.append(None)
        header_start = self.start if self.start is not None else offset
        self.finish(offset, opens=index)
        self.stack.append(_Open(kind, name, header_start, offset, index))
        self.depth = 0


def blank(text: str, start: int, end: int) -> str:
    """`text` with [start, end) replaced by spaces, newlines kept (so no position moves)."""
    middle = re.sub(r"[^\n]", " ", text[start:end])
    return text[:start] + middle + text[end:]


def blank_all(text: str, ranges: Sequence[tuple[int, int]]) -> str:
    """`text` with every [start, end) of `ranges` blanked, in one pass (nested ones too)."""
    pieces, position = [], 0
    for start, end in sorted(ranges):
        start = max(start, position)
        if end <= start:
            continue
        pieces += [text[position:start], re.sub(r"[^\n]", " ", text[start:end])]
        position = end
    return "".join([*pieces, text[position:]])


def _region(found: Scan, offset: int, text: str) -> tuple[int, int]:
    """What to blank for an error at `offset`: its statement, or the block its header opens."""
    candidates = [s for s in found.statements if s.start <= offset <= s.end]
    if not candidates:
        return offset, min(len(text), offset + 1)
    # A statement that ends where the error is did not end properly (an open bracket): that one.
    statement = next(
        (s for s in candidates if s.end == offset and s.start < offset),
        max(candidates, key=lambda s: s.start),
    )
    if statement.opens is not None:
        block = found.blocks[statement.opens]
        end = block.closed + 1 if block.closed is not None else block.ended
        return statement.start, end
    if statement.block == -1:  # stray text at the top level: up to the next pipeline
        following = [b.start for b in found.blocks if b.start > offset and b.kind == "pipeline"]
        return statement.start, min(following, default=len(text))
    return statement.start, statement.end


def _parsed_prefix_blanked(text: str, found: Scan, before: int) -> str:
    """`text` with everything before `before` blanked but the headers of the blocks around it.

    The parser already accepted that prefix; blanking it makes the next parse start, in effect,
    at the error, so recovering a file costs about one parse of it in all.
    """
    keep = sorted(
        (block.start, block.opened + 1)
        for block in found.blocks
        if block.opened < before
        and (block.closed if block.closed is not None else block.ended) >= before
    )
    position = 0
    for start, end in keep:
        text = blank(text, position, min(start, before))
        position = max(position, end)
    return blank(text, position, before) if position < before else text


def unclosed(source: SourceFile, block: Block, gave_up: Span | None) -> Diagnostic:
    """`unclosed '{' of stage 'X'` at the brace, with where the parser gave up."""
    what = f"{block.kind} '{block.name}'" if block.name else "block"
    notes = [Note("the parser gave up here", gave_up)] if gave_up is not None else []
    if block.ended < len(source.text):
        ends = source.span(block.ended, block.ended + 1)
        if gave_up is None or gave_up.line != ends.line:
            notes.append(
                Note(f"'}}' expected before this (it cannot be inside the {block.kind})", ends)
            )
    return error(
        Code.SYNTAX,
        f"unclosed '{{' of {what}",
        source.span(block.opened, block.opened + 1),
        notes=notes,
        hints=[f"add '}}' where the {block.kind} ends"],
    )


def recover(
    source: SourceFile,
    first: Diagnostic,
    first_offset: int,
    reparse: Callable[[str], tuple[Diagnostic, int] | None],
    tokens: int,
) -> list[Diagnostic]:
    """Every syntax error of `source`, starting from the parser's first (`first` at `first_offset`).

    `reparse(text)` parses a repaired text: None when it parses, else its first diagnostic and
    that error's offset. `tokens` is the file's token count, for the budget.
    """
    text = source.text
    problems: list[Diagnostic] = []
    diagnostic: Diagnostic | None = first
    offset = first_offset
    budget = RECOVERY_TOKENS
    found = scan(text)  # once: blanking keeps every offset, so the structure stays valid
    open_blocks = [b for b in found.blocks if b.closed is None]
    if open_blocks:
        before = [b for b in open_blocks if b.opened < offset]
        culprit = max(before, key=lambda b: b.opened) if before else None
        # at most MAX_SYNTAX_ERRORS of them are reported (the one the parser gave up in among
        # them), and all are repaired in one pass: a flood of '{' costs one scan, not one each
        shown = open_blocks[:MAX_SYNTAX_ERRORS]
        if culprit is not None and culprit not in shown:
            shown = [*shown[: MAX_SYNTAX_ERRORS - 1], culprit]
        for block in shown:
            gave_up = first.span if block is culprit else None
            problems.append(unclosed(source, block, gave_up))
        # the first pipeline left open to the end of the file is closed there; the rest blanked
        closed_at_end = next(
            (b for b in open_blocks if b.ended == len(text) and b.kind == "pipeline"), None
        )
        ranges = [(b.start, b.ended) for b in open_blocks if b is not closed_at_end]
        text = blank_all(text, ranges) + ("}" if closed_at_end is not None else "")
        found = scan(text)
        result = reparse(text)
        budget -= tokens
        diagnostic, offset = (None, 0) if result is None else result
    closing = {b.closed for b in found.blocks}
    while diagnostic is not None and len(problems) < MAX_SYNTAX_ERRORS and budget >= tokens:
        if source.text[offset : offset + 1] == "}" and offset not in closing:
            hints = (*diagnostic.hints, "this '}' closes no block: remove it")
            diagnostic = attrs.evolve(diagnostic, hints=hints)
        problems.append(diagnostic)
        start, end = _region(found, offset, text)
        repaired = blank(text, start, end)
        if repaired == text:
            start, end = offset, min(len(text), offset + 1)
            repaired = blank(text, start, end)
        if repaired == text:
            break
        text = _parsed_prefix_blanked(repaired, found, start)
        budget -= tokens
        result = reparse(text)
        diagnostic, offset = (None, 0) if result is None else result
    return problems[:MAX_SYNTAX_ERRORS]
