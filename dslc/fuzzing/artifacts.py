"""Mutation fuzzing of `.wf` sources and compiled artifacts (shared by bench/fuzz.py and
tests/test_fuzz.py).

Two targets, one contract each:

- a mutated source through `dslc.compiler.compile_text` gives a `CompileResult` (clean, or with
  diagnostics), never any other exception;
- a mutated artifact through `runtime.load_formulas` loads, or raises a `runtime.FormulaError`.

Either must finish within `CASE_SECONDS` of CPU time (`CaseClock`: the work a case does, the same on
a quiet or a loaded machine; wall time only guards against a hang). Every mutator takes a
`random.Random` so a case is reproducible from its seed: `mutate_source(random.Random(seed), text)`.
"""

from __future__ import annotations

import copy
import json
import random
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from dslc.parse import KEYWORDS as RESERVED

__all__ = [
    "ARTIFACT_MUTATORS",
    "CASE_SECONDS",
    "SOURCE_MUTATORS",
    "CaseClock",
    "Failure",
    "check_artifact",
    "check_source",
    "mutate_artifact",
    "mutate_source",
    "tokenize",
]

CASE_SECONDS = 1.0  # a single case using more CPU time than this is a failure
HANG_FACTOR = 10.0  # a case idle this many times its CPU limit in wall time is hung (a FIFO read)


class CaseClock:
    """CPU and wall time of one case: the limit is on CPU time (this process, all its threads),
    so a loaded machine does not fail a case; wall time past ``HANG_FACTOR`` times it is a hang."""

    def __init__(self) -> None:
        self.cpu, self.wall = time.process_time(), time.perf_counter()

    def elapsed(self) -> tuple[float, float]:
        """CPU and wall seconds since the case started."""
        return time.process_time() - self.cpu, time.perf_counter() - self.wall

    def overrun(self, seconds: float | None) -> str | None:
        """What a case past its limit did, or None within it (no limit: None)."""
        cpu, wall = self.elapsed()
        if seconds is None:
            return None
        if cpu > seconds:
            return f"took {cpu:.2f} s of CPU time (limit {seconds} s)"
        if wall > seconds * HANG_FACTOR:
            return f"took {wall:.2f} s of wall time (hang limit {seconds * HANG_FACTOR:g} s)"
        return None


# --------------------------------------------------------------------------- outcomes


class Failure(Exception):
    """A case broke the contract: an unexpected exception, a wrong result type, or too slow."""

    def __init__(self, kind: str, mutation: str, problem: str, payload: object) -> None:
        super().__init__(f"{kind} [{mutation}]: {problem}")
        self.kind = kind
        self.mutation = mutation
        self.problem = problem
        self.payload = payload


def check_source(text: str, mutation: str = "?", seconds: float | None = CASE_SECONDS) -> float:
    """Compile `text`; return the seconds taken, or raise `Failure` (past `seconds` too)."""
    from dslc.compiler import CompileResult, compile_text
    from dslc.diagnostics import Diagnostic

    clock = CaseClock()
    try:
        result = compile_text(text, "fuzz.wf")
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise Failure("source", mutation, f"{type(exc).__name__}: {exc}"[:500], text) from exc
    if not isinstance(result, CompileResult) or not all(
        isinstance(d, Diagnostic) for d in result.diagnostics
    ):
        raise Failure("source", mutation, f"not a clean CompileResult: {result!r}"[:500], text)
    if not (result.ok or result.errors):
        raise Failure("source", mutation, "no program and no error diagnostic", text)
    if (overrun := clock.overrun(seconds)) is not None:
        raise Failure("source", mutation, overrun, text)
    return clock.elapsed()[0]


def check_artifact(
    payload: object, mutation: str = "?", seconds: float | None = CASE_SECONDS
) -> float:
    """Load `payload` (a mapping or JSON text) and evaluate every pipeline, memory and time terms
    too, at its default workload; return the seconds taken, or raise `Failure`. A `FormulaError`
    is a clean outcome.
    """
    from runtime import FormulaError, load_formulas

    clock = CaseClock()
    try:
        book = load_formulas(payload)  # type: ignore[arg-type]  # mutated on purpose
        for name in book:
            pipeline = book[name]
            pipeline.evaluate()
            for stage in pipeline.stages:  # a measure's terms have evaluators of their own
                pipeline.memory_terms(stage)
                pipeline.time_terms(stage)
    except FormulaError:
        pass
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise Failure("artifact", mutation, f"{type(exc).__name__}: {exc}"[:500], payload) from exc
    if (overrun := clock.overrun(seconds)) is not None:
        raise Failure("artifact", mutation, overrun, payload)
    return clock.elapsed()[0]


# --------------------------------------------------------------------------- sources

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


# --------------------------------------------------------------------------- artifacts

KINDS = (
    "int",
    "frac",
    "bool",
    "param",
    "let",
    "neg",
    "abs",
    "floor",
    "ceil",
    "add",
    "sub",
    "mul",
    "div",
    "floordiv",
    "mod",
    "pow",
    "min",
    "max",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "and",
    "or",
    "not",
    "if",
    "call",
    "attr",
    "lambda",
    "import",
    "",
    "INT",
)
CODE_NAMES = (
    "__import__('os').system('x')",
    "steps; import os",
    "__class__",
    "__builtins__",
    "lambda: 0",
    "exec",
    "eval",
    "os.system",
    "steps\nimport os",
    "a" * 65,
    "",
    "1steps",
    "stéps",
    "None",
    "True",
    "_",
    "globals()",
)
WEIRD_VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    1.5,
    float("inf"),
    "",
    "x",
    [],
    {},
    [[]],
    {"k": "int"},
    10**4300,
    -(10**4301),
    2**64,
    "40",
    [1, 2],
    {"k": "int", "v": 1},
)


#: Where a value sits in a JSON tree: (parent container, key or index, value); the root's parent
#: is None.
Slot = tuple[Any, Any, Any]


def _is_expr(value: Any) -> bool:
    return isinstance(value, dict) and "k" in value


def _nodes(doc: Any, keep: Callable[[Any], bool] = lambda value: True) -> list[Slot]:
    """The slot of every value in a JSON tree (root included, breadth first) that `keep` accepts.

    One pass over the containers, with a slot made only for kept values: walking the 12,000-value
    artifact once per mutation was most of a fuzz case's time.
    """
    out: list[Slot] = [(None, None, doc)] if keep(doc) else []
    containers = [doc] if isinstance(doc, (dict, list)) else []
    for node in containers:  # grows while it is walked
        for key, child in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(child, (dict, list)):
                containers.append(child)
            if keep(child):
                out.append((node, key, child))
    return out


def _expr_nodes(doc: Any) -> list[Slot]:
    return _nodes(doc, _is_expr)


def _set(doc: Any, slot: Slot, value: Any) -> Any:
    """Put `value` where `slot` points; return the document (`value` itself at the root)."""
    parent, key, _ = slot
    if parent is None:
        return value
    parent[key] = value
    return doc


def _within(outer: Any, inner: Any) -> bool:
    """Whether `inner` is `outer` or one of its descendants (by identity)."""
    return any(value is inner for _, _, value in _nodes(outer)) or outer is inner


def _pick_expr(rng: random.Random, doc: Any) -> Slot | None:
    nodes = _expr_nodes(doc)
    return rng.choice(nodes) if nodes else None


def _flip_kind(rng: random.Random, doc: Any) -> Any:
    picked = _pick_expr(rng, doc)
    if picked:
        picked[2]["k"] = rng.choice(KINDS)
    return doc


def _drop_arg(rng: random.Random, doc: Any) -> Any:
    nodes = _nodes(
        doc, lambda v: _is_expr(v) and isinstance(v.get("args"), list) and bool(v["args"])
    )
    if nodes:
        node = rng.choice(nodes)[2]
        node["args"].pop(rng.randrange(len(node["args"])))
    return doc


def _add_arg(rng: random.Random, doc: Any) -> Any:
    picked = _pick_expr(rng, doc)
    if picked:
        node = picked[2]
        extra = (
            copy.deepcopy(rng.choice(_expr_nodes(doc))[2])
            if rng.random() < 0.5
            else rng.choice(WEIRD_VALUES)
        )
        if not isinstance(node.get("args"), list):
            node["args"] = []
        node["args"].append(extra)
    return doc


def _huge_int(rng: random.Random, doc: Any) -> Any:
    ints = _nodes(doc, lambda v: isinstance(v, int) and not isinstance(v, bool))
    if ints:
        _set(
            doc,
            rng.choice(ints),
            rng.choice(
                [10**4299, 10**4300, -(10**4300), 2**63, -(2**63) - 1, 10**30, 65, 10**6, -1, 0]
            ),
        )
    return doc


def _deep_tree(rng: random.Random, doc: Any) -> Any:
    picked = _pick_expr(rng, doc)
    if picked:
        depth = rng.choice([50, 199, 200, 201, 300])  # deeper trees travel as text (`deep-json`)
        node: Any = picked[2]
        for _ in range(depth):
            node = rng.choice(
                [
                    {"k": "neg", "args": [node]},
                    {"k": "abs", "args": [node]},
                    {"k": "add", "args": [node, {"k": "int", "v": 1}]},
                ]
            )
        _set(doc, picked, node)
    return doc


def _wide_tree(rng: random.Random, doc: Any) -> Any:
    """Many args (`min`/`max` take any number) or a huge power: work, not depth."""
    picked = _pick_expr(rng, doc)
    if picked:
        node: dict[str, Any]
        if rng.random() < 0.5:
            node = {
                "k": rng.choice(["min", "max", "add"]),
                "args": [picked[2]] * rng.choice([2, 3, 10_000]),
            }
        else:
            node = {
                "k": "pow",
                "args": [{"k": "int", "v": 10**4299}],
                "exp": rng.choice([2, 64, 65, 10**9]),
            }
        _set(doc, picked, node)
    return doc


def _code_name(rng: random.Random, doc: Any) -> Any:
    named = _nodes(doc, lambda v: isinstance(v, dict) and isinstance(v.get("name"), str))
    if named:
        node = rng.choice(named)[2]
        node["name"] = rng.choice(CODE_NAMES)
    return doc


def _wrong_version(rng: random.Random, doc: Any) -> Any:
    key, value = rng.choice(
        [
            ("format_version", 2),
            ("format_version", 0),
            ("format_version", "1"),
            ("format_version", 1.0),
            ("format_version", True),
            ("format", "workload-formula"),
            ("format", None),
            ("compiler", None),
            ("sources", {}),
            ("pipelines", None),
        ]
    )
    if isinstance(doc, dict):
        doc[key] = value
    return doc


def _wrong_type(rng: random.Random, doc: Any) -> Any:
    return _set(doc, rng.choice(_nodes(doc)), copy.deepcopy(rng.choice(WEIRD_VALUES)))


def _drop_key(rng: random.Random, doc: Any) -> Any:
    keyed = _nodes(doc, lambda v: isinstance(v, dict) and bool(v))
    if keyed:
        node = rng.choice(keyed)[2]
        del node[rng.choice(list(node))]
    return doc


def _add_key(rng: random.Random, doc: Any) -> Any:
    keyed = _nodes(doc, lambda v: isinstance(v, dict))
    if keyed:
        node = rng.choice(keyed)[2]
        node[rng.choice(["extra", "__proto__", "k", "v", "exp", "args", "name", "code"])] = (
            rng.choice(WEIRD_VALUES)
        )
    return doc


def _duplicate_item(rng: random.Random, doc: Any) -> Any:
    lists = _nodes(doc, lambda v: isinstance(v, list) and bool(v))
    if lists:
        items = rng.choice(lists)[2]
        items.insert(rng.randrange(len(items) + 1), copy.deepcopy(rng.choice(items)))
    return doc


def _swap_subtrees(rng: random.Random, doc: Any) -> Any:
    nodes = _expr_nodes(doc)
    if len(nodes) >= 2:
        first, second = rng.sample(nodes, 2)
        a, b = first[2], second[2]
        if not (_within(a, b) or _within(b, a)):
            _set(doc, first, copy.deepcopy(b))
            _set(doc, second, copy.deepcopy(a))
    return doc


ARTIFACT_MUTATORS: dict[str, Callable[[random.Random, Any], Any]] = {
    "flip-kind": _flip_kind,
    "drop-arg": _drop_arg,
    "add-arg": _add_arg,
    "huge-int": _huge_int,
    "deep-tree": _deep_tree,
    "wide-tree": _wide_tree,
    "code-name": _code_name,
    "wrong-version": _wrong_version,
    "wrong-type": _wrong_type,
    "drop-key": _drop_key,
    "add-key": _add_key,
    "duplicate-item": _duplicate_item,
    "swap-subtrees": _swap_subtrees,
}


def _dumps(doc: Any) -> str:
    try:
        return json.dumps(doc, allow_nan=True)
    except (
        ValueError,
        RecursionError,
    ):  # an int over Python's str-conversion limit: the loader sees the mapping instead
        return ""


def _clone(doc: Any) -> Any:
    """A deep copy; a JSON round trip is several times faster than `copy.deepcopy` on a clean
    document.
    """
    try:
        return json.loads(json.dumps(doc))
    except (ValueError, TypeError, RecursionError):
        return copy.deepcopy(doc)


def mutate_artifact(
    rng: random.Random, doc: dict[str, Any] | str, *, rounds: int | None = None
) -> tuple[str, object]:
    """Mutate a deep copy of `doc` 1-3 times; return (names, payload). The payload is usually the
    mutated mapping, sometimes its JSON text: whole, truncated, or with random bytes flipped.

    `doc` may be the document's JSON text: parsing it is the cheapest fresh copy, for a caller that
    mutates one document many times."""
    doc = json.loads(doc) if isinstance(doc, str) else _clone(doc)
    names = []
    for _ in range(rounds if rounds is not None else rng.randint(1, 3)):
        name = rng.choice(list(ARTIFACT_MUTATORS))
        doc = ARTIFACT_MUTATORS[name](rng, doc)
        names.append(name)
        if name == "deep-tree":  # keep our own deepcopy and walks clear of the recursion limit
            break
    if not isinstance(doc, dict):  # the whole document replaced: a file whose JSON is not an object
        text = _dumps(doc)
        return "+".join(names + ["json-bytes"]), (text or "null").encode()
    roll = rng.random()
    if roll < 0.7:
        return "+".join(names), doc
    text = _dumps(doc)
    if not text:
        return "+".join(names), doc
    if roll < 0.75:
        return "+".join(names + ["json-text"]), text
    if (
        roll < 0.8
    ):  # a tree far deeper than the loader's limit, deeper than Python's recursion limit
        depth = rng.choice([1000, 10_000, 100_000])
        wrap = rng.choice(['{"k": "neg", "args": [', "[", '{"a": '])
        close = {"[": "]", '{"a": ': "}"}.get(wrap, "]}")
        deep = wrap * depth + '{"k": "int", "v": 1}' + close * depth
        return "+".join(names + ["deep-json"]), text.replace('{"k": "int", "v": 1}', deep, 1)
    if roll < 0.9:
        return "+".join(names + ["truncated-json"]), text[: rng.randint(0, len(text))]
    data = bytearray(text.encode())
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return "+".join(names + ["json-bytes-flip"]), bytes(data)


def real_sources(folder: str = "formulas") -> list[str]:
    """The text of every `*.wf` file under `folder`, sorted by path: the seed corpus."""
    from pathlib import Path

    return [p.read_text() for p in sorted(Path(folder).rglob("*.wf"))]


def real_artifact(folder: str = "formulas") -> dict[str, Any]:
    """The artifact document of `folder`, compiled in memory (a fresh JSON round trip)."""
    from dslc import emit
    from dslc.compiler import compile_paths

    result = compile_paths([folder])
    if result.program is None or not result.ok:
        raise RuntimeError(f"{folder} does not compile cleanly: {result.errors[:1]}")
    return json.loads(emit.dumps(emit.artifact(result.program)))
