"""Grammar-driven fuzzing (`hypothesis.extra.lark`): grammatical text yields diagnostics, never a
traceback.
"""

from __future__ import annotations

from importlib import resources

import lark
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark

from dslc.compiler import compile_text
from dslc.parse import KEYWORDS

GRAMMAR = resources.files("dslc.grammar").joinpath("workload.lark").read_text()
# A plain Lark over the same grammar; terminals are spaced so keywords never fuse with names.
FUZZ_PARSER = lark.Lark(GRAMMAR, start="module", parser="lalr", lexer="basic")
TEXT = from_lark(
    FUZZ_PARSER,
    explicit={
        "_SEP": st.sampled_from(["\n", ";", "\r\n"]),
        "NAME": st.sampled_from(
            [
                "steps",
                "frames",
                "x",
                "tokens",
                "S",
                "p",
                "min",
                "len",
                "int",
                "bool",
                "iterations",
                "memory",
                "time",
            ]
        ).map(lambda s: f" {s} "),
        "INT": st.sampled_from(["0", "1", "4", "1_000", "99999999999999999999999999999999"]).map(
            lambda s: f" {s} "
        ),
        "DECIMAL": st.sampled_from(["0.5", "0.725"]).map(lambda s: f" {s} "),
    },
)


# from_lark expands recursive rules: drawing a text is slow, generation alone can exceed too_slow.
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT)
def test_grammatical_text_compiles_or_gives_diagnostics(text: str) -> None:
    spaced = text
    for keyword in KEYWORDS:
        spaced = spaced.replace(keyword, f" {keyword} ")
    result = compile_text(spaced, "fuzz.wf")
    assert result.ok or result.errors
    for diagnostic in result.diagnostics:
        assert "__ANON" not in diagnostic.message and "$END" not in diagnostic.message
