"""Mutators of the compiled artifact document: edits of its JSON tree (node kinds, args, huge ints,
deep and wide trees, code-like names, wrong types and keys) and of its JSON text, reproducible
from a `random.Random`, and the seed document they start from.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from typing import TypeAlias, TypeGuard, TypeVar

from artifact.write import JsonObject, JsonValue

__all__ = ["ARTIFACT_MUTATORS", "CODE_NAMES", "mutate_artifact", "real_artifact"]

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
WEIRD_VALUES: tuple[JsonValue, ...] = (
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


#: A JSON container; a key or index into one.
Container: TypeAlias = "JsonObject | list[JsonValue]"
Key: TypeAlias = "str | int"
#: The kind of value a walk keeps (what its `keep` guard proves).
V = TypeVar("V")
#: Where a value sits in a JSON tree: (parent container, key or index, value); the root's parent
#: is None.
Slot: TypeAlias = "tuple[Container | None, Key | None, V]"
#: A mutation: the document (perhaps changed in place) or what replaces it.
Mutator: TypeAlias = "Callable[[random.Random, JsonValue], JsonValue]"

_WRONG_HEADERS: tuple[tuple[str, JsonValue], ...] = (
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
)


def _every(value: JsonValue) -> TypeGuard[JsonValue]:
    return True


def _is_expr(value: JsonValue) -> TypeGuard[JsonObject]:
    return isinstance(value, dict) and "k" in value


def _has_args(value: JsonValue) -> TypeGuard[JsonObject]:
    return _is_expr(value) and isinstance(value.get("args"), list) and bool(value["args"])


def _is_int(value: JsonValue) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_named(value: JsonValue) -> TypeGuard[JsonObject]:
    return isinstance(value, dict) and isinstance(value.get("name"), str)


def _is_object(value: JsonValue) -> TypeGuard[JsonObject]:
    return isinstance(value, dict)


def _is_filled_object(value: JsonValue) -> TypeGuard[JsonObject]:
    return isinstance(value, dict) and bool(value)


def _is_filled_list(value: JsonValue) -> TypeGuard[list[JsonValue]]:
    return isinstance(value, list) and bool(value)


def _nodes(doc: JsonValue, keep: Callable[[JsonValue], TypeGuard[V]]) -> list[Slot[V]]:
    """The slot of every value in a JSON tree (root included, breadth first) that `keep` accepts.

    One pass over the containers, with a slot made only for kept values: walking the 12,000-value
    artifact once per mutation was most of a fuzz case's time.
    """
    out: list[Slot[V]] = [(None, None, doc)] if keep(doc) else []
    containers: list[Container] = [doc] if isinstance(doc, (dict, list)) else []
    key: Key
    child: JsonValue
    for node in containers:  # grows while it is walked
        for key, child in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(child, (dict, list)):
                containers.append(child)
            if keep(child):
                out.append((node, key, child))
    return out


def _expr_nodes(doc: JsonValue) -> list[Slot[JsonObject]]:
    return _nodes(doc, _is_expr)


def _set(doc: JsonValue, slot: Slot[JsonValue], value: JsonValue) -> JsonValue:
    """Put `value` where `slot` points; return the document (`value` itself at the root)."""
    parent, key, _ = slot
    if parent is None:
        return value
    if isinstance(parent, dict) and isinstance(key, str):  # noqa: SIM114 - each narrows its own
        parent[key] = value
    elif isinstance(parent, list) and isinstance(key, int):
        parent[key] = value
    return doc


def _slots(doc: JsonValue) -> list[Slot[JsonValue]]:
    """The slot of every value in a JSON tree."""
    return _nodes(doc, _every)


def _within(outer: JsonValue, inner: JsonValue) -> bool:
    """Whether `inner` is `outer` or one of its descendants (by identity)."""
    return any(value is inner for _, _, value in _slots(outer)) or outer is inner


def _pick_expr(rng: random.Random, doc: JsonValue) -> Slot[JsonObject] | None:
    nodes = _expr_nodes(doc)
    return rng.choice(nodes) if nodes else None


def _flip_kind(rng: random.Random, doc: JsonValue) -> JsonValue:
    picked = _pick_expr(rng, doc)
    if picked:
        picked[2]["k"] = rng.choice(KINDS)
    return doc


def _drop_arg(rng: random.Random, doc: JsonValue) -> JsonValue:
    nodes: list[Slot[JsonObject]] = _nodes(doc, _has_args)
    if nodes:
        args = rng.choice(nodes)[2]["args"]
        if isinstance(args, list):  # always: `_has_args` kept only nodes with a list
            args.pop(rng.randrange(len(args)))
    return doc


def _add_arg(rng: random.Random, doc: JsonValue) -> JsonValue:
    picked = _pick_expr(rng, doc)
    if picked:
        node = picked[2]
        extra = (
            copy.deepcopy(rng.choice(_expr_nodes(doc))[2])
            if rng.random() < 0.5
            else rng.choice(WEIRD_VALUES)
        )
        args = node.get("args")
        if not isinstance(args, list):
            args = []
            node["args"] = args
        args.append(extra)
    return doc


def _huge_int(rng: random.Random, doc: JsonValue) -> JsonValue:
    ints: list[Slot[int]] = _nodes(doc, _is_int)
    if ints:
        _set(
            doc,
            rng.choice(ints),
            rng.choice(
                [10**4299, 10**4300, -(10**4300), 2**63, -(2**63) - 1, 10**30, 65, 10**6, -1, 0]
            ),
        )
    return doc


def _deep_tree(rng: random.Random, doc: JsonValue) -> JsonValue:
    picked = _pick_expr(rng, doc)
    if picked:
        depth = rng.choice([50, 199, 200, 201, 300])  # deeper trees travel as text (`deep-json`)
        node: JsonValue = picked[2]
        for _ in range(depth):
            wraps: list[JsonValue] = [
                {"k": "neg", "args": [node]},
                {"k": "abs", "args": [node]},
                {"k": "add", "args": [node, {"k": "int", "v": 1}]},
            ]
            node = rng.choice(wraps)
        _set(doc, picked, node)
    return doc


def _wide_tree(rng: random.Random, doc: JsonValue) -> JsonValue:
    """Many args (`min`/`max` take any number) or a huge power: work, not depth."""
    picked = _pick_expr(rng, doc)
    if picked:
        node: JsonObject
        if rng.random() < 0.5:
            one: list[JsonValue] = [picked[2]]
            node = {
                "k": rng.choice(["min", "max", "add"]),
                "args": one * rng.choice([2, 3, 10_000]),
            }
        else:
            node = {
                "k": "pow",
                "args": [{"k": "int", "v": 10**4299}],
                "exp": rng.choice([2, 64, 65, 10**9]),
            }
        _set(doc, picked, node)
    return doc


def _code_name(rng: random.Random, doc: JsonValue) -> JsonValue:
    named: list[Slot[JsonObject]] = _nodes(doc, _is_named)
    if named:
        node = rng.choice(named)[2]
        node["name"] = rng.choice(CODE_NAMES)
    return doc


def _wrong_version(rng: random.Random, doc: JsonValue) -> JsonValue:
    key, value = rng.choice(_WRONG_HEADERS)
    if isinstance(doc, dict):
        doc[key] = value
    return doc


def _wrong_type(rng: random.Random, doc: JsonValue) -> JsonValue:
    return _set(doc, rng.choice(_slots(doc)), copy.deepcopy(rng.choice(WEIRD_VALUES)))


def _drop_key(rng: random.Random, doc: JsonValue) -> JsonValue:
    keyed: list[Slot[JsonObject]] = _nodes(doc, _is_filled_object)
    if keyed:
        node = rng.choice(keyed)[2]
        del node[rng.choice(list(node))]
    return doc


def _add_key(rng: random.Random, doc: JsonValue) -> JsonValue:
    keyed: list[Slot[JsonObject]] = _nodes(doc, _is_object)
    if keyed:
        node = rng.choice(keyed)[2]
        node[rng.choice(["extra", "__proto__", "k", "v", "exp", "args", "name", "code"])] = (
            rng.choice(WEIRD_VALUES)
        )
    return doc


def _duplicate_item(rng: random.Random, doc: JsonValue) -> JsonValue:
    lists: list[Slot[list[JsonValue]]] = _nodes(doc, _is_filled_list)
    if lists:
        items = rng.choice(lists)[2]
        items.insert(rng.randrange(len(items) + 1), copy.deepcopy(rng.choice(items)))
    return doc


def _swap_subtrees(rng: random.Random, doc: JsonValue) -> JsonValue:
    nodes = _expr_nodes(doc)
    if len(nodes) >= 2:
        first, second = rng.sample(nodes, 2)
        a, b = first[2], second[2]
        if not (_within(a, b) or _within(b, a)):
            _set(doc, first, copy.deepcopy(b))
            _set(doc, second, copy.deepcopy(a))
    return doc


ARTIFACT_MUTATORS: dict[str, Mutator] = {
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


def _dumps(doc: JsonValue) -> str:
    try:
        return json.dumps(doc, allow_nan=True)
    except (
        ValueError,
        RecursionError,
    ):  # an int over Python's str-conversion limit: the loader sees the mapping instead
        return ""


def _clone(doc: JsonValue) -> JsonValue:
    """A deep copy; a JSON round trip is several times faster than `copy.deepcopy` on a clean
    document.
    """
    try:
        return json.loads(json.dumps(doc))
    except (ValueError, TypeError, RecursionError):
        return copy.deepcopy(doc)


def mutate_artifact(
    rng: random.Random, doc: JsonObject | str, *, rounds: int | None = None
) -> tuple[str, object]:
    """Mutate a deep copy of `doc` 1-3 times; return (names, payload). The payload is usually the
    mutated mapping, sometimes its JSON text: whole, truncated, or with random bytes flipped.

    `doc` may be the document's JSON text: parsing it is the cheapest fresh copy, for a caller that
    mutates one document many times."""
    tree: JsonValue = json.loads(doc) if isinstance(doc, str) else _clone(doc)
    names = []
    for _ in range(rounds if rounds is not None else rng.randint(1, 3)):
        name = rng.choice(list(ARTIFACT_MUTATORS))
        tree = ARTIFACT_MUTATORS[name](rng, tree)
        names.append(name)
        if name == "deep-tree":  # keep our own deepcopy and walks clear of the recursion limit
            break
    if not isinstance(
        tree, dict
    ):  # the whole document replaced: a file whose JSON is not an object
        text = _dumps(tree)
        return "+".join(names + ["json-bytes"]), (text or "null").encode()
    roll = rng.random()
    if roll < 0.7:
        return "+".join(names), tree
    text = _dumps(tree)
    if not text:
        return "+".join(names), tree
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


def real_artifact(folder: str = "formulas") -> JsonObject:
    """The artifact document of `folder`, compiled in memory (a fresh JSON round trip)."""
    from dslc import emit
    from dslc.compiler import compile_paths

    result = compile_paths([folder])
    if result.program is None or not result.ok:
        raise RuntimeError(f"{folder} does not compile cleanly: {result.errors[:1]}")
    return json.loads(emit.dumps(emit.artifact(result.program)))
