"""Diagnostic codes as one enum, each with the line docs/language.md's table shows for it."""

from __future__ import annotations

import enum


class Code(enum.StrEnum):
    """Why a diagnostic was given; the value is what `error[CODE]` and `--json` print."""

    SYNTAX = "syntax"
    UNDEFINED_NAME = "undefined-name"
    DUPLICATE = "duplicate"
    CYCLE = "cycle"
    TYPE = "type"
    DOMAIN = "domain"
    NEGATIVE = "negative"
    NON_INTEGER = "non-integer"
    DIVISION_BY_ZERO = "division-by-zero"
    LIMIT = "limit"
    UNPROVEN = "unproven"

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self]


DESCRIPTIONS: dict[Code, str] = {
    Code.SYNTAX: "the text does not parse (says what was expected)",
    Code.UNDEFINED_NAME: "an unknown param, let, function or parent pipeline",
    Code.DUPLICATE: "a name declared twice in one scope (both places shown)",
    Code.CYCLE: "lets or `extends` that refer back to themselves",
    Code.TYPE: "a bool where a number is needed, a list misused, wrong arity",
    Code.DOMAIN: "an empty range, a default outside its range or contract",
    Code.NEGATIVE: "an `iterations` or measure that can be negative",
    Code.NON_INTEGER: "an `iterations` that can be a non-integer",
    Code.DIVISION_BY_ZERO: "a divisor that can be zero",
    Code.LIMIT: (
        "a resource bound exceeded: file size, tokens (newlines count), nesting, exponent, "
        "literal size, or a limit the loader shares (pipelines, stages, members, 64-character "
        "names, 100,000 nodes after `extends`, a probe group of at most 8 params that calibration "
        "can weigh, and the static cost model: a value's bits over the params' ranges, work per "
        'evaluation and per load; see docs/artifact.md "Limits"); the prover\'s work budget per '
        "file"
    ),
    Code.UNPROVEN: "a property neither proved nor refuted (warning)",
}


def docs_table() -> str:
    """The markdown table of codes in docs/language.md, rendered from the enum so they agree."""
    rows = ["| code | meaning |", "| --- | --- |"]
    rows += [f"| `{code.value}` | {code.description} |" for code in Code]
    return "\n".join(rows) + "\n"
