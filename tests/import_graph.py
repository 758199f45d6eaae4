"""Every import of the project's modules, read from the source with `ast`, so the layering test
sees imports inside functions and under `if TYPE_CHECKING:` that importing the module never runs.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent


@attrs.frozen
class Import:
    """One import statement (or `importlib.import_module("...")` call) of a module."""

    module: str  # the importing module
    target: str  # the imported module, absolute (`from x import y` is `x`; see `Graph.resolve`)
    names: tuple[str, ...]  # what `from x import ...` names (each may be a submodule)
    line: int
    eager: bool  # runs when the module is imported: at module or class level, not TYPE_CHECKING

    @property
    def root(self) -> str:
        return self.target.split(".")[0]

    def __str__(self) -> str:
        when = "" if self.eager else " (lazily)"
        return f"{self.module}:{self.line} imports {self.target}{when}"


def module_name(path: Path, root: Path = ROOT) -> str:
    """`runtime/estimate/__init__.py` -> `runtime.estimate`."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(packages: Iterable[str], root: Path = ROOT) -> dict[str, Path]:
    """Every module of the given top-level folders, by dotted name."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(path, root)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_module_call(node: ast.Call) -> str | None:
    """The literal name of `importlib.import_module("x")` or `__import__("x")`; else None."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


class _Collector(ast.NodeVisitor):
    """Walks one module's tree, noting each import and whether importing the module runs it."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[Import] = []
        self._lazy = 0  # inside a function body (or a TYPE_CHECKING block)

    def _note(self, target: str, names: tuple[str, ...], line: int) -> None:
        self.found.append(Import(self.module, target, names, line, eager=self._lazy == 0))

    def _absolute(self, name: str, level: int) -> str:
        if level == 0:
            return name
        base = self.package.split(".")
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))

    def _deferred(self, nodes: Sequence[ast.AST]) -> None:
        self._lazy += 1
        for node in nodes:
            self.visit(node)
        self._lazy -= 1

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._note(alias.name, (), node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = self._absolute(node.module or "", node.level)
        self._note(target, tuple(alias.name for alias in node.names), node.lineno)

    def visit_Call(self, node: ast.Call) -> None:
        name = _import_module_call(node)
        if name is not None and not name.startswith("."):
            self._note(name, (), node.lineno)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._deferred([node.body])

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for part in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if part is not None:
                self.visit(part)  # evaluated when the def runs
        self._deferred(node.body)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._deferred(node.body)
            for part in node.orelse:
                self.visit(part)
        else:
            self.generic_visit(node)


def imports_of(path: Path, module: str) -> list[Import]:
    """Every import in one source file."""
    collector = _Collector(module, path.name == "__init__.py")
    collector.visit(ast.parse(path.read_text(), str(path)))
    return collector.found


@attrs.frozen(repr=False)
class Graph:
    """The project's modules and every import between them and to the outside."""

    paths: Mapping[str, Path]
    imports: tuple[Import, ...]

    @classmethod
    def read(cls, packages: Iterable[str], root: Path = ROOT) -> Graph:
        paths = modules(packages, root)
        found = [item for name, path in paths.items() for item in imports_of(path, name)]
        return cls(paths, tuple(found))

    def resolve(self, item: Import) -> list[str]:
        """The modules an import runs: the target and, for `from x import y`, `x.y` when that is a
        module of the project, with the packages above each."""
        targets = [item.target] + [
            f"{item.target}.{name}" for name in item.names if f"{item.target}.{name}" in self.paths
        ]
        out: list[str] = []
        for target in targets:
            parts = target.split(".")
            out += [".".join(parts[: i + 1]) for i in range(len(parts))]
        return list(dict.fromkeys(out))

    def eagerly_loaded(self, module: str) -> set[str]:
        """Every module (the project's and the outside's) importing `module` alone runs."""
        seen: set[str] = set()
        parts = module.split(".")
        stack = [".".join(parts[: i + 1]) for i in range(len(parts))]
        by_module: dict[str, list[Import]] = {}
        for item in self.imports:
            by_module.setdefault(item.module, []).append(item)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            for item in by_module.get(name, ()):
                if item.eager:
                    stack += self.resolve(item)
        return seen

    def of(self, prefix: str) -> Iterator[Import]:
        """The imports made by `prefix` and the modules below it."""
        for item in self.imports:
            if item.module == prefix or item.module.startswith(prefix + "."):
                yield item

    def edges(self) -> dict[str, set[str]]:
        """Module -> the project's modules it imports, lazily or not: `from x import y` is `x.y`
        when that is a module (and `x` too when it also names something else), `import x.y` is
        `x.y`; the packages above a target are not edges (importing them is not a choice)."""
        out: dict[str, set[str]] = {}
        for item in self.imports:
            targets = self.resolve_edge(item)
            if targets:
                out.setdefault(item.module, set()).update(targets)
        return out

    def circles(self) -> list[tuple[str, ...]]:
        """Every import circle: each set of modules that import one another, through any chain of
        imports (lazy ones included), sorted."""
        return circles(sorted(self.paths), self.edges())

    def room_edges(self) -> dict[tuple[str, str], list[Import]]:
        """(room, room) -> the imports that make one room import the other, where a room is a
        sub-package of a top-level package or one of its top-level modules (`room`), and both
        rooms are of the same top-level package."""
        out: dict[tuple[str, str], list[Import]] = {}
        for item in self.imports:
            for target in self.resolve_edge(item):
                here, there = room(item.module), room(target)
                if here != there and here.split(".")[0] == there.split(".")[0]:
                    out.setdefault((here, there), []).append(item)
        return out

    def resolve_edge(self, item: Import) -> set[str]:
        """The project's modules one import is an edge to (as `edges` counts them)."""
        targets = {
            f"{item.target}.{name}" for name in item.names if f"{item.target}.{name}" in self.paths
        }
        if item.target in self.paths and len(targets) < max(len(item.names), 1):
            targets.add(item.target)
        targets.discard(item.module)
        return targets

    def room_circles(self) -> list[tuple[str, ...]]:
        """Every circle between rooms (sub-packages, or top-level modules) of one package."""
        edges: dict[str, set[str]] = {}
        for here, there in self.room_edges():
            edges.setdefault(here, set()).add(there)
        return circles(sorted({room(module) for module in self.paths}), edges)


def room(module: str) -> str:
    """The room a module is in: `calibration.plan.apply` -> `calibration.plan`; a top-level module
    (`calibration.errors`) and the package itself (`calibration`) are each their own."""
    return ".".join(module.split(".")[:2])


def circles(nodes: Sequence[str], edges: Mapping[str, set[str]]) -> list[tuple[str, ...]]:
    """Each set of nodes that reach one another along ``edges``, sorted; Tarjan's strongly
    connected components, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))
    return sorted(found)
