"""The checker of expression trees (the artifact's closed IR): kinds, arity, types, scope, depth
and the bounds of every node, with the formulas already checked kept by identity (`CheckedTrees`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from artifact.cost import leaf_bits, node_bounds
from artifact.errors import ArtifactError
from artifact.ir import Expr
from artifact.json_checks import (
    SMALL,
    as_int,
    as_list,
    as_name,
    as_object,
    describe,
    fail,
    into,
    over_limit,
)
from artifact.limits import (
    MAX_CALL_WORK,
    MAX_DEPTH,
    MAX_LOAD_WORK,
    MAX_NODES,
    MAX_POW_EXPONENT,
    MAX_VALUE_BITS,
)
from artifact.spelling import file_value

__all__ = [
    "KINDS",
    "CheckedTrees",
    "NodeBudget",
    "Scope",
    "check_expr",
    "check_formula",
    "same_tree",
]


class NodeBudget:
    """Expression nodes and evaluation work left for the rest of an artifact: its bytes are
    bounded, but a file of tiny nodes would still take seconds to check and compile, and a few
    nodes can stand for a huge value."""

    def __init__(self, limit: int = MAX_NODES, work: int = MAX_LOAD_WORK) -> None:
        self.left = limit
        self.work_left = work

    def take(self, count: int, path: object) -> None:
        self.left -= count
        if self.left < 0:
            raise over_limit(
                path, f"the artifact has over {MAX_NODES:,} expression nodes", limit="MAX_NODES"
            )

    def spend(self, work: int, path: object) -> None:
        """Charge evaluating one formula once (as the loader does at the default workload)."""
        self.work_left -= work
        if self.work_left < 0:
            raise over_limit(
                path,
                f"evaluating every formula once would take over {MAX_LOAD_WORK:,} word operations",
                limit="MAX_LOAD_WORK",
            )


# What a checked tree read of its scope: each (kind, name) it names and what the scope held for it
# then (the ref, the type and the bounds): the same tree in a scope that holds the same for each
# checks to the same Expr.
_Reads = tuple[tuple[str, str, tuple[object, ...]], ...]


class CheckedTrees:
    """Formulas already checked, by the identity of their JSON object, with what they read of
    their scope and the nodes they took.

    The compiler emits a formula once and shares the object among every pipeline that inherits
    it, so validating a family checks each formula once, not once per child (issue 23); the
    loader reads fresh JSON, where nothing is shared, and keeps none.
    """

    def __init__(self) -> None:
        self.entries: dict[int, tuple[object, _Reads, Expr, int]] = {}
        self.hits = 0
        self.misses = 0


class Scope:
    """Names an expression may refer to: params, and the lets declared so far, with their bounds.

    `param_bits[i]` bounds param i; `let_bounds[i]` is let i's `(bits, dbits)`; `let_work` is the
    work of every let so far (an evaluation may compute all of them); `trees`, when kept, the
    formulas already checked.
    """

    def __init__(
        self,
        params: dict[str, tuple[int, str]],
        lets: dict[str, tuple[int, str]],
        budget: NodeBudget | None = None,
        param_bits: list[int] | None = None,
        trees: CheckedTrees | None = None,
    ) -> None:
        self.params = params
        self.lets = lets
        self.budget = budget or NodeBudget()
        self.param_bits = param_bits if param_bits is not None else [1] * len(params)
        self.let_bounds: dict[int, tuple[int, int]] = {}
        self.let_work = 0
        self.trees = trees

    def read(self, kind: str, name: str) -> tuple[object, ...]:
        """What the scope holds for a name a tree refers to (None: not in scope)."""
        table = self.params if kind == "param" else self.lets
        found = table.get(name)
        if found is None:
            return (None,)
        ref, typ = found
        bounds = self.param_bits[ref] if kind == "param" else self.let_bounds.get(ref, (1, 0))
        return (ref, typ, bounds)

    def charge(self, expr: Expr, path: object) -> None:
        """One formula evaluated on its own: its work plus every let's must fit one call, and it
        counts towards the artifact's load work."""
        work = expr.work + self.let_work
        if work > MAX_CALL_WORK:
            raise over_limit(
                path,
                f"evaluating this may take {work:,} word operations (its lets included); "
                f"the limit is {MAX_CALL_WORK:,}",
                limit="MAX_CALL_WORK",
            )
        self.budget.spend(expr.work, path)


_UNARY = frozenset({"neg", "abs", "floor", "ceil"})
_BINARY = frozenset({"add", "sub", "mul", "div", "floordiv", "mod"})
_VARIADIC = frozenset({"min", "max"})
_ORDER = frozenset({"lt", "le", "gt", "ge"})
_EQUALITY = frozenset({"eq", "ne"})
_LOGIC = frozenset({"and", "or"})
_WITH_ARGS = (  # compound kinds whose node is exactly `{"k", "args"}` (not `pow`: it has `exp`)
    frozenset({"not", "if"}) | _UNARY | _BINARY | _VARIADIC | _ORDER | _EQUALITY | _LOGIC
)
KINDS = frozenset({"int", "frac", "bool", "param", "let", "pow"}) | _WITH_ARGS


def check_expr(node: object, path: object, scope: Scope, depth: int) -> Expr:
    """Validate one node and its children; recursion is bounded by MAX_DEPTH, never by the input.

    Well-formed nodes take the short paths below (the loader's time goes here); anything else
    falls through to the general checks, which raise the precise error.
    """
    if depth > MAX_DEPTH:
        raise over_limit(
            path, f"expression nested deeper than {MAX_DEPTH} levels", limit="MAX_DEPTH"
        )
    if type(node) is dict and len(node) == 2:
        kind = node.get("k")
        if type(kind) is str:
            if kind in _WITH_ARGS and "args" in node:
                return _compound(node, kind, path, scope, depth)
            if kind == "param" or kind == "let":
                name = node.get("name")
                table = scope.params if kind == "param" else scope.lets
                if type(name) is str and name in table:  # the tables hold validated names only
                    ref, typ = table[name]
                    if kind == "param":
                        return Expr(kind, typ, (), None, ref, None, scope.param_bits[ref])
                    bits, dbits = scope.let_bounds.get(ref, (1, 0))
                    return Expr(kind, typ, (), None, ref, None, bits, dbits)
            elif kind == "int":
                v = node.get("v")
                if type(v) is int and -SMALL < v < SMALL:
                    bits = v.bit_length() if v >= 0 else (-v).bit_length()
                    return Expr("int", "int", (), v, None, None, bits)
    return _check_any(node, path, scope, depth)


def check_formula(node: object, path: object, scope: Scope) -> Expr:
    """A whole formula (a let's, a field's, a contract's, a call's): check_expr at the top, or,
    when the scope keeps checked trees, the Expr of the same object checked before in a scope
    that held the same for every name it reads, charged the same nodes."""
    trees = scope.trees
    if trees is None or type(node) is not dict:
        return check_expr(node, path, scope, 1)
    budget = scope.budget
    entry = trees.entries.get(id(node))
    if entry is not None and entry[0] is node:
        _, reads, expr, nodes = entry
        if nodes <= budget.left and all(scope.read(k, n) == held for k, n, held in reads):
            budget.left -= nodes
            trees.hits += 1
            return expr
    before = budget.left
    expr = check_expr(node, path, scope, 1)
    trees.misses += 1
    trees.entries[id(node)] = (node, _reads(node, scope), expr, before - budget.left)
    return expr


def _reads(node: object, scope: Scope) -> _Reads:
    """The names a checked tree refers to, with what the scope holds for each (an iterative
    walk: the tree passed check_expr, so every node is well formed)."""
    seen: dict[tuple[str, str], tuple[object, ...]] = {}
    stack = [node]
    while stack:
        item = stack.pop()
        assert isinstance(item, dict)
        kind = item["k"]
        if kind == "param" or kind == "let":
            key = (kind, item["name"])
            if key not in seen:
                seen[key] = scope.read(*key)
        elif "args" in item:
            stack.extend(item["args"])
    return tuple((kind, name, held) for (kind, name), held in seen.items())


def _check_any(node: object, path: object, scope: Scope, depth: int) -> Expr:
    """The general path of check_expr: every node kind, every error."""
    if type(node) is not dict and not isinstance(node, Mapping):
        raise fail(path, f"expected an expression object, got {describe(node)}")
    kind = node.get("k")
    if type(kind) is not str:
        raise fail(path, "missing or non-string node kind 'k'")
    if kind not in KINDS:
        raise fail(into(path, ".k"), f"unknown node kind {file_value(kind)}")
    if kind == "int":
        as_object(node, path, ("k", "v"))
        v = as_int(node["v"], into(path, ".v"))
        return Expr("int", "int", (), v, None, None, leaf_bits(v))
    if kind == "frac":
        as_object(node, path, ("k", "n", "d"))
        n, d = as_int(node["n"], into(path, ".n")), as_int(node["d"], into(path, ".d"), 2)
        if math.gcd(n, d) != 1:
            raise fail(path, f"fraction {n}/{d} is not in lowest terms")
        return Expr("frac", "rat", (), Fraction(n, d), None, None, leaf_bits(n), d.bit_length())
    if kind == "bool":
        as_object(node, path, ("k", "v"))
        if type(node["v"]) is not bool:
            raise fail(into(path, ".v"), f"expected a boolean, got {describe(node['v'])}")
        return Expr("bool", "bool", (), node["v"], None, None)
    if kind in ("param", "let"):
        as_object(node, path, ("k", "name"))
        name = as_name(node["name"], into(path, ".name"))
        table = scope.params if kind == "param" else scope.lets
        if name not in table:
            what = "param" if kind == "param" else "let (lets may refer only to earlier lets)"
            raise fail(into(path, ".name"), f"unknown {what} {name!r}")
        ref, typ = table[name]
        if kind == "param":
            return Expr(kind, typ, (), None, ref, None, scope.param_bits[ref])
        bits, dbits = scope.let_bounds.get(ref, (1, 0))
        return Expr(kind, typ, (), None, ref, None, bits, dbits)
    return _compound(node, kind, path, scope, depth)


def _compound(
    node: Mapping[str, object], kind: str, path: object, scope: Scope, depth: int
) -> Expr:
    """A node with `args`: its key set, arity, children (depth + 1) and type."""
    exp = None
    if kind == "pow":
        as_object(node, path, ("k", "args", "exp"))
        exp = as_int(node["exp"], into(path, ".exp"), 0)
        if exp > MAX_POW_EXPONENT:
            raise over_limit(
                into(path, ".exp"),
                f"exponent {exp} is over {MAX_POW_EXPONENT}",
                limit="MAX_POW_EXPONENT",
            )
    elif not (type(node) is dict and len(node) == 2 and "args" in node):
        as_object(node, path, ("k", "args"))
    raw = node["args"]
    if type(raw) is not list:
        raw = as_list(raw, into(path, ".args"))
    want = 1 if kind in _UNARY or kind in ("pow", "not") else 3 if kind == "if" else 2
    if (len(raw) < 1) if kind in _VARIADIC else (len(raw) != want):
        expected = "at least 1" if kind in _VARIADIC else str(want)
        raise fail(into(path, ".args"), f"{kind!r} takes {expected} args, got {len(raw)}")
    args_path = into(path, ".args")
    budget = scope.budget
    budget.left -= len(raw)
    if budget.left < 0:
        budget.take(0, args_path)  # raises the limit error
    checked = []
    for i, arg in enumerate(raw):  # a plain loop: two Python frames per tree level, not three
        checked.append(check_expr(arg, (args_path, i), scope, depth + 1))  # `[i]` when rendered
    args = tuple(checked)
    typ = _result_type(kind, args, args_path)
    bits, dbits, work = node_bounds(kind, args, exp)
    if bits > MAX_VALUE_BITS or dbits > MAX_VALUE_BITS:
        raise over_limit(
            path,
            f"this value may reach {max(bits, dbits):,} bits over the declared param ranges; "
            f"the limit is {MAX_VALUE_BITS:,} (narrow the params' ranges)",
            limit="MAX_VALUE_BITS",
        )
    return Expr(kind, typ, args, None, None, exp, bits, dbits, work)


def _result_type(kind: str, args: tuple[Expr, ...], args_path: object) -> str:
    """Type-check a node's args and give its type; booleans never mix with numbers."""
    if kind in _LOGIC or kind == "not":
        for i, arg in enumerate(args):
            if arg.type != "bool":
                raise _needs(kind, "boolean", "a number", args_path, i)
        return "bool"
    if kind == "if":
        if args[0].type != "bool":
            raise _needs(kind, "boolean", "a number", args_path, 0)
        a, b = args[1].type, args[2].type
        if (a == "bool") != (b == "bool"):
            raise fail(
                into(args_path, "[2]"),
                "the branches of 'if' have different types (number vs boolean)",
            )
        return "bool" if a == "bool" else ("int" if a == b == "int" else "rat")
    if kind in _EQUALITY:
        if (args[0].type == "bool") != (args[1].type == "bool"):
            raise fail(into(args_path, "[1]"), f"{kind!r} compares a number with a boolean")
        return "bool"
    integral = True
    for i, arg in enumerate(args):  # every other kind takes numbers only
        if arg.type != "int":
            if arg.type != "rat":
                raise _needs(kind, "number", "a boolean", args_path, i)
            integral = False
    if kind in _ORDER:
        return "bool"
    if kind in ("floor", "ceil", "floordiv"):
        return "int"
    if kind == "div":
        return "rat"
    return "int" if integral else "rat"


def _needs(kind: str, want: str, got: str, args_path: object, i: int) -> ArtifactError:
    """The error for arg `i` of a `kind` node being of the wrong type."""
    return fail(into(args_path, f"[{i}]"), f"{kind!r} needs a {want} here, got {got}")


def same_tree(a: Expr, b: Expr) -> bool:
    """Whether two validated trees are the same node for node (an iterative walk, no recursion)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if (
            x.kind != y.kind
            or x.type != y.type
            or x.ref != y.ref
            or x.exp != y.exp
            or type(x.value) is not type(y.value)
            or x.value != y.value
            or len(x.args) != len(y.args)
        ):
            return False
        stack.extend(zip(x.args, y.args))
    return True
