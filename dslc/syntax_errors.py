"""Lark's parse errors as diagnostics: what was found, what was expected, and a hint for the usual
slips (`&&`, `^`, chained comparisons, `=` for `==`).
"""

from __future__ import annotations

from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from dslc.codes import Code
from dslc.diagnostics import Diagnostic, error
from dslc.source import SourceFile
from dslc.terminals import describe_expected, describe_token, token_span

_HINT_CHARACTERS = {
    "&": "use 'and' for logical and",
    "|": "use 'or' for logical or",
    "!": "use 'not' for negation and '!=' for inequality",
    "^": "use '**' for powers",
    '"': "the language has no strings; names and numbers only",
    "'": "the language has no strings; names and numbers only",
}


def syntax_diagnostic(source: SourceFile, exc: UnexpectedInput) -> Diagnostic:
    """The one door where every parser error becomes a `syntax` diagnostic."""
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
        return error(Code.SYNTAX, message, span, hints=hints)
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        expected = set(exc.accepts or exc.expected)
        span = token_span(source, token)
        message = f"unexpected {describe_token(token)}"
        if expected:
            message += f"; expected {describe_expected(expected)}"
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
        return error(Code.SYNTAX, message, span, hints=hints)
    if isinstance(exc, UnexpectedEOF):
        end = len(source.text)
        return error(
            Code.SYNTAX,
            f"unexpected end of input; expected {describe_expected(set(exc.expected))}",
            source.span(end, end),
        )
    return error(Code.SYNTAX, "the text does not parse", source.span(0, 0))


def error_offset(source: SourceFile, exc: UnexpectedInput) -> int:
    """Where in the text the parser gave up."""
    if isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
        return exc.token.start_pos or 0
    if isinstance(exc, UnexpectedCharacters):
        return exc.pos_in_stream or 0
    return len(source.text)
