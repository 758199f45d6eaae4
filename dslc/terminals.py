"""The language's reserved words and human names for the parser's terminals, so no message ever
says `$END` or `_RBRACE`.
"""

from __future__ import annotations

from lark import Token

from dslc.source import SourceFile, Span

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
EXPRESSION_START = {"INT", "DECIMAL", "NAME", "MINUS", "LPAR", "LBRACK", "TRUE", "FALSE", "INF"}


def token_span(source: SourceFile, token: Token) -> Span:
    """Where a token sits; separators and end of input cover one column."""
    line, column = token.line or 1, token.column or 1
    end_line = token.end_line or line
    end_column = token.end_column or column + max(1, len(str(token)))
    if token.type in ("_SEP", "NEWLINE") or token.type == "$END":
        end_line, end_column = line, column + 1
    return Span(source, line, column, end_line, end_column)


OPERATORS = {
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


def describe_expected(expected: set[str]) -> str:
    expected = set(expected)
    groups = []
    if EXPRESSION_START <= expected:
        expected -= EXPRESSION_START
        groups.append("an expression")
    elif len(expected & OPERATORS) >= 3:
        expected -= OPERATORS
        groups.append("an operator")
    names = groups + sorted({TERMINAL_NAMES.get(t, t.lower()) for t in expected})
    if len(names) > 6:
        names = names[:6] + ["..."]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + (", or " if len(names) > 2 else " or ") + names[-1]


def describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of input"
    if token.type in ("_SEP", "NEWLINE"):
        return "end of line" if token.value.strip() != ";" else "';'"
    return f"'{token.value}'"
