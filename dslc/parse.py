"""Text to AST: Lark (LALR, strict, positions) with the file-size, token and nesting limits checked
before or while it runs; syntax errors go through error recovery for more than one diagnostic.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Iterator
from importlib import resources
from typing import cast

import lark
from lark import Token
from lark.exceptions import UnexpectedInput

from dslc import ast
from dslc.ast_builder import PARSE_STATE, AstBuilder, ParseState
from dslc.codes import Code
from dslc.diagnostics import CompileError, Diagnostic, error
from dslc.limits import MAX_FILE_BYTES, MAX_NESTING, MAX_TOKENS
from dslc.parser_cache import cache_folder, cache_name, cached_parser
from dslc.source import SourceFile
from dslc.syntax_errors import error_offset, syntax_diagnostic
from dslc.terminals import KEYWORDS, TERMINAL_NAMES, token_span

__all__ = ["KEYWORDS", "TERMINAL_NAMES", "parse", "parse_text"]


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


def parser_cache_path() -> str | None:
    """Where the parser's tables are kept between processes (`dslc.parser_cache`), None when
    nowhere."""
    folder = cache_folder()
    return None if folder is None else os.path.join(folder, cache_name())


@functools.cache
def _parser() -> lark.Lark:
    """The LALR parser, built once per process (it holds no per-parse state); its tables come
    from the user's cache when a valid one is there. A cache that is refused (a link, a FIFO,
    another user's file or folder) is named in one line on stderr: it is worth a look."""
    grammar = resources.files("dslc.grammar").joinpath("workload.lark").read_text()
    parser, note = cached_parser(
        grammar,
        {
            "start": "module",
            "parser": "lalr",
            "lexer": "contextual",
            "strict": True,
            "maybe_placeholders": False,
        },
        postlex=_Separators(),
        transformer=AstBuilder(),
    )
    if note:
        sys.stderr.write(note + "\n")
    return parser


def parse(source: SourceFile) -> ast.Module:
    """Parse one file; raise CompileError with diagnostics on anything malformed."""
    tokens = _screen(source)
    state = ParseState(source)
    token = PARSE_STATE.set(state)
    try:
        module = cast(ast.Module, _parser().parse(source.text))  # the embedded transformer's result
    except _LimitHit as hit:
        raise CompileError(
            [
                error(
                    Code.LIMIT,
                    hit.message,
                    token_span(source, hit.token),
                    hints=["name part of the expression with a 'let'"],
                )
            ]
        ) from None
    except UnexpectedInput as exc:
        from dslc.recover import recover

        first = syntax_diagnostic(source, exc)
        raise CompileError(
            recover(source, first, error_offset(source, exc), _reparser(source), tokens)
        ) from None
    finally:
        PARSE_STATE.reset(token)
    if state.problems:
        raise CompileError(state.problems)
    return ast.Module(module.pipelines, source, tuple(_comments(source)))


def _screen(source: SourceFile) -> int:
    """What Lark is never given: a file over the size limit, control characters, more tokens than
    the limit; the file's token count otherwise (recovery's budget)."""
    size = len(source.text.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        raise CompileError(
            [
                error(
                    Code.LIMIT,
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
                    Code.SYNTAX,
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
                    Code.LIMIT,
                    f"file has over {MAX_TOKENS:,} tokens (newlines count); the limit is "
                    f"{MAX_TOKENS:,}",
                    source.span(0, 0),
                    hints=["split the pipelines across several files"],
                )
            ]
        )
    return tokens


def _reparser(source: SourceFile) -> Callable[[str], tuple[Diagnostic, int] | None]:
    """Parse a repaired copy of `source` (same length, same lines): its first error, or None."""

    def reparse(text: str) -> tuple[Diagnostic, int] | None:
        repaired = SourceFile(source.name, text)
        token = PARSE_STATE.set(ParseState(repaired))
        try:
            _parser().parse(text)
        except _LimitHit:
            return None
        except UnexpectedInput as exc:
            return syntax_diagnostic(source, exc), error_offset(repaired, exc)
        finally:
            PARSE_STATE.reset(token)
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
