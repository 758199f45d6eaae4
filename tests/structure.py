"""The structure counts the ratchets hold (issue 42): `Any` in annotations, string comparisons
against an enum's values, functions over 60 lines, modules over 500 lines and import circles
between the sub-packages of a package, each read from the source with `ast` under any root
(`bench/structure.py --root` counts another checkout)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from tests.import_graph import ROOT, Graph

#: The product packages counted, in layering order.
PACKAGES = ("artifact", "dslc", "runtime", "calibration")
#: The most lines a function may have.
MOST_FUNCTION_LINES = 60
#: The most lines a module may have (beyond: two jobs, waiting to be split).
MOST_MODULE_LINES = 500
_ENUM_BASES = frozenset({"Enum", "StrEnum", "IntEnum", "Flag", "IntFlag"})


def sources(package: Path) -> Iterator[tuple[Path, ast.Module]]:
    """Each module of a package folder, parsed, in path order."""
    for path in sorted(package.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


# --- Any in annotations ----------------------------------------------------------------------


def _anys(node: ast.AST | None) -> int:
    """The `Any` names (`Any`, `typing.Any`) in an annotation, string annotations parsed."""
    count = 0
    for part in ast.walk(node) if node is not None else ():
        if _is_name(part, "Any"):
            count += 1
        elif isinstance(part, ast.Constant) and isinstance(part.value, str):
            try:
                count += _anys(ast.parse(part.value, mode="eval"))
            except SyntaxError:
                pass
    return count


def _is_alias(node: ast.Assign) -> bool:
    """`Name = dict[str, Any]`: an assignment of a type expression to one name."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return False
    value = node.value
    if isinstance(value, ast.BinOp):
        return isinstance(value.op, ast.BitOr)
    return isinstance(value, ast.Subscript) or (isinstance(value, ast.Name) and value.id == "Any")


def any_count(tree: ast.Module) -> int:
    """`Any` in a module's argument and return annotations, annotated assignments and aliases."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            count += sum(_anys(a.annotation) for a in every if a is not None)
            count += _anys(node.returns)
        elif isinstance(node, ast.AnnAssign):
            alias = _anys(node.value) if _names(node.annotation, "TypeAlias") else 0
            count += _anys(node.annotation) + alias
        elif isinstance(node, ast.Assign) and _is_alias(node):
            count += _anys(node.value)
        elif type(node).__name__ == "TypeAlias":  # `type X = ...` (Python 3.12)
            count += _anys(getattr(node, "value", None))
    return count


def _is_name(node: ast.AST, name: str) -> bool:
    """`name` or `module.name`."""
    return (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name
    )


def _names(node: ast.AST, name: str) -> bool:
    return any(_is_name(n, name) for n in ast.walk(node))


def _is_call(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and _is_name(node.func, name)


# --- string comparisons against enum values --------------------------------------------------


def _base_name(base: ast.expr) -> str:
    return base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")


def enum_values(trees: Iterable[ast.Module]) -> set[str]:
    """The string values of every enum member the trees define (subclasses of enums included;
    `auto()` in a StrEnum is the member's name in lower case)."""
    classes = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    enums, string_enums = set(_ENUM_BASES), {"StrEnum"}
    grew = True
    while grew:  # an enum's subclass is an enum, wherever it is defined
        before = len(enums)
        for cls in classes:
            bases = {_base_name(b) for b in cls.bases}
            if bases & enums:
                enums.add(cls.name)
            if bases & string_enums:
                string_enums.add(cls.name)
        grew = len(enums) > before
    values: set[str] = set()
    for cls in classes:
        bases = {_base_name(b) for b in cls.bases}
        if not bases & enums:
            continue
        for item in cls.body:
            if not isinstance(item, ast.Assign) or not isinstance(item.targets[0], ast.Name):
                continue
            if isinstance(item.value, ast.Constant) and isinstance(item.value.value, str):
                values.add(item.value.value)
            elif bases & string_enums and _is_call(item.value, "auto"):
                values.add(item.targets[0].id.lower())
    return values


def _literals(node: ast.expr) -> list[str]:
    """The string literals a comparison side is: one, or a tuple/list/set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [
            e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
    return []


def enum_string_comparisons(tree: ast.Module, values: set[str]) -> list[int]:
    """The lines of each `==`, `!=`, `in`, `not in` with a string literal side that is an enum
    value (`phase.kind == "component"` where `PhaseKind.COMPONENT` exists)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, sides, sides[1:], strict=False):
            if not isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn):
                continue
            if any(v in values for v in [*_literals(left), *_literals(right)]):
                found.append(node.lineno)
                break
    return sorted(found)


# --- sizes -----------------------------------------------------------------------------------


def long_functions(package: Path) -> list[str]:
    """``path:line name (N lines)`` for each function of ``package`` over the most lines."""
    found = []
    for path, tree in sources(package):
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MOST_FUNCTION_LINES:
                    found.append(f"{path.relative_to(package)}:{node.lineno} {node.name} ({lines})")
    return found


def long_modules(package: Path) -> dict[str, int]:
    """Each module of ``package`` over the most lines (its path under the root), with its lines."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MOST_MODULE_LINES:
            found[path.relative_to(package.parent).as_posix()] = lines
    return found


# --- circles between sub-packages ------------------------------------------------------------


def subpackage_circles(package: str, root: Path = ROOT) -> list[tuple[str, ...]]:
    """Each set of rooms of ``package`` (its sub-packages; a top-level module is a room of its own)
    that import one another, lazily or not: the layering test's own check
    (``tests.import_graph.Graph.room_circles``), counted."""
    return Graph.read([package], root).room_circles()


# --- the table -------------------------------------------------------------------------------


def counts(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, dict[str, int]]:
    """Per package: `any`, `enum_strings`, `long_functions`, `long_modules`, `circles`."""
    packages = tuple(packages)
    parsed = {p: list(sources(root / p)) for p in packages}
    values = enum_values(tree for found in parsed.values() for _, tree in found)
    return {
        p: {
            "any": sum(any_count(tree) for _, tree in parsed[p]),
            "enum_strings": sum(len(enum_string_comparisons(t, values)) for _, t in parsed[p]),
            "long_functions": len(long_functions(root / p)),
            "long_modules": len(long_modules(root / p)),
            "circles": len(subpackage_circles(p, root)),
        }
        for p in packages
    }


def table(found: Mapping[str, Mapping[str, int]]) -> str:
    """The counts as a plain-text table, a row per package and a total."""
    columns = ["any", "enum_strings", "long_functions", "long_modules", "circles"]
    rows = [[p, *(str(c[k]) for k in columns)] for p, c in found.items()]
    rows.append(["total", *(str(sum(c[k] for c in found.values())) for k in columns)])
    head = ["package", *columns]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [head, *rows]
    )
