"""Mutators of `.wf` sources: token-level edits (delete, swap, insert keywords, huge numbers, deep
brackets...) reproducible from a `random.Random`, and the seed corpus they start from.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

from dslc.parse import KEYWORDS as RESERVED

__all__ = ["SOURCE_MUTATORS", "mutate_source", "real_sources", "tokenize"]

_TOKEN = re.compile(
    r"\s+|#[^\n]*|[A-Za-z_][A-Za-z0-9_]*|\d[\d_]*(?:\.\d+)?|\*\*|//|[<>=!]=|.", re.DOTALL
)
#: What mutations insert: the reserved words (dslc.parse), then other names the language gives a
#: meaning (types, fields, functions, the contextual keywords of pipeline facts).
KEYWORDS = (
    *RESERVED,
    "int",
    "bool",
    "iterations",
    "memory",
    "time",
    "len",
    "sum",
    "min",
    "max",
    "floor",
    "ceil",
    "abs",
    "call",
    "probe",
    "uses",
    "per",
    "step",
    "vae.decode",
)
OPERATORS = (
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "**",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "=",
    "~",
    ":",
    ",",
    ";",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "\n",
    ".",
    "..",
    "@",
    "$",
    "\\",
    '"',
    "'",
)
HUGE_NUMBERS = (
    "9" * 31,
    "9" * 5000,
    "1" + "0" * 400,
    "1_000_000_000_000_000_000",
    "0.000000000000001",
    "1e400",
    "0x10",
    "007",
    "1__0",
    "18446744073709551617",
    "99999999999999999999.5",
)


def tokenize(text: str) -> list[str]:
    """Split into tokens, keeping whitespace and comments, so `"".join(tokenize(t)) == t`."""
    return _TOKEN.findall(text)


def _solid(tokens: Sequence[str]) -> list[int]:
    return [i for i, t in enumerate(tokens) if t.strip() and not t.startswith("#")] or [0]


def _delete(rng: random.Random, tokens: list[str]) -> list[str]:
    i = rng.choice(_solid(tokens))
    return tokens[:i] + tokens[i + 1 :]


def _duplicate(rng: random.Random, tokens: list[str]) -> list[str]:
    i = rng.choice(_solid(tokens))
    return tokens[: i + 1] + [" "] * rng.randint(0, 1) + tokens[i:]


def _swap(rng: random.Random, tokens: list[str]) -> list[str]:
    solid = _solid(tokens)
    i, j = rng.choice(solid), rng.choice(solid)
    tokens = list(tokens)
    if i < len(tokens) and j < len(tokens):
        tokens[i], tokens[j] = tokens[j], tokens[i]
    return tokens


def _insert(rng: random.Random, tokens: list[str], new: str) -> list[str]:
    i = rng.randint(0, len(tokens))
    return tokens[:i] + [rng.choice(["", " "]) + new + rng.choice(["", " "])] + tokens[i:]


def _operator(rng: random.Random, tokens: list[str]) -> list[str]:
    return _insert(rng, tokens, rng.choice(OPERATORS))


def _keyword(rng: random.Random, tokens: list[str]) -> list[str]:
    return _insert(rng, tokens, rng.choice(KEYWORDS))


def _huge_number(rng: random.Random, tokens: list[str]) -> list[str]:
    numbers = [i for i, t in enumerate(tokens) if t[:1].isdigit()]
    if numbers and rng.random() < 0.6:
        tokens = list(tokens)
        tokens[rng.choice(numbers)] = rng.choice(HUGE_NUMBERS)
        return tokens
    return _insert(rng, tokens, rng.choice(HUGE_NUMBERS))


def _power(rng: random.Random, tokens: list[str]) -> list[str]:
    """`** N` after a name or number: exponents around and far over the limit, chained powers."""
    solid = [
        i
        for i in _solid(tokens)
        if i < len(tokens) and (tokens[i][:1].isalnum() or tokens[i] == ")")
    ]
    if not solid:
        return _operator(rng, tokens)
    i = rng.choice(solid)
    tail = rng.choice(
        [
            "** 64",
            "** 65",
            "** 1000",
            "** 99999999",
            "** 2 ** 2 ** 2 ** 2",
            "** -1",
            "** 0.5",
            "** steps",
            "** (2 ** 40)",
        ]
    )
    return tokens[: i + 1] + [" " + tail + " "] + tokens[i + 1 :]


def _deep_brackets(rng: random.Random, tokens: list[str]) -> list[str]:
    depth = rng.choice([8, 63, 64, 65, 100, 101, 500, 5000])
    opener, closer = rng.choice(
        [("(", ")"), ("[", "]"), ("{", "}"), ("-", ""), ("not ", ""), ("abs(", ")"), ("1 + (", ")")]
    )
    balanced = rng.random() < 0.7
    return _insert(rng, tokens, opener * depth + "1" + (closer * depth if balanced else ""))


def _long_chain(rng: random.Random, tokens: list[str]) -> list[str]:
    """A flat but long expression or list: many tokens, a long list, a long `and` chain."""
    n = rng.choice([100, 1025, 3000, 9000])
    piece = rng.choice([" + 1", " * x", ", 1", " and true", " if 1 then"])
    return _insert(rng, tokens, "1" + piece * n)


def _truncate(rng: random.Random, tokens: list[str]) -> list[str]:
    return tokens[: rng.randint(0, len(tokens))]


def _random_bytes(rng: random.Random, tokens: list[str]) -> list[str]:
    alphabet = "\x00\x01\x7f\ufeff\u00e9\u200b\u2028\U0001f600\ud800\t\r\v\f" + "".join(
        map(chr, range(32, 127))
    )
    junk = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16)))
    return _insert(rng, tokens, junk)


def _rename(rng: random.Random, tokens: list[str]) -> list[str]:
    """Replace a name with a keyword, another name of the file, or a nasty one."""
    names = [i for i, t in enumerate(tokens) if t[:1].isalpha() or t[:1] == "_"]
    if not names:
        return _keyword(rng, tokens)
    tokens = list(tokens)
    others = [tokens[i] for i in names]
    tokens[rng.choice(names)] = rng.choice(
        others + list(KEYWORDS) + ["__import__", "_" * 70, "x" * 200, "__class__", "None", "lambda"]
    )
    return tokens


SOURCE_MUTATORS: dict[str, Callable[[random.Random, list[str]], list[str]]] = {
    "delete": _delete,
    "duplicate": _duplicate,
    "swap": _swap,
    "operator": _operator,
    "keyword": _keyword,
    "huge-number": _huge_number,
    "power": _power,
    "deep-brackets": _deep_brackets,
    "long-chain": _long_chain,
    "truncate": _truncate,
    "random-bytes": _random_bytes,
    "rename": _rename,
}


def mutate_source(rng: random.Random, text: str, *, rounds: int | None = None) -> tuple[str, str]:
    """Apply 1-3 random token mutations; return (`+`-joined mutator names, mutated text)."""
    tokens = tokenize(text)
    names = []
    for _ in range(rounds if rounds is not None else rng.randint(1, 3)):
        name = rng.choice(list(SOURCE_MUTATORS))
        tokens = SOURCE_MUTATORS[name](rng, tokens)
        names.append(name)
    return "+".join(names), "".join(tokens)


def real_sources(folder: str = "formulas") -> list[str]:
    """The text of every `*.wf` file under `folder`, sorted by path: the seed corpus."""
    from pathlib import Path

    return [p.read_text() for p in sorted(Path(folder).rglob("*.wf"))]
