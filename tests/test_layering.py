"""The layering holds: compiler (dslc) -> artifact <- runtime <- calibration <- bench.

Every import of every module is read from the source (`tests/import_graph.py`: module level, inside
functions, under TYPE_CHECKING, `importlib.import_module("...")`), so an arrow back that runs only
when a function is called is caught too; then every module is imported alone in a fresh
interpreter, which must work and must not pull in what its layer may not load.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.import_graph import ROOT, Graph, modules, room
from tests.warm_interpreter import Imported, WarmInterpreter

PACKAGES = ("artifact", "dslc", "runtime", "calibration", "bench")

#: The compiler's tool modules that load back what they build through the runtime (the only
#: modules of `dslc` that may import `runtime`): the compile-and-load helper (`dslc.build`, which
#: `dslc build` uses), the command line's plumbing (loading an artifact for `eval`, `list`...)
#: and the fuzzing harness. Each must use the runtime (a test), so the list stays exact.
DSLC_RUNTIME_TOOLS = frozenset(
    {"dslc.build", "dslc.cli_compile", "dslc.cli_failures", "dslc.fuzzing.harness"}
)

#: The modules of `calibration.plan` that move torch modules and pin their tensors
#: (`calibration.core.weights` sizes them); the planner itself is pure.
PLAN_TORCH = frozenset({"calibration.plan.apply", "calibration.plan.pinning"})

FORBIDDEN = {
    "artifact": {"dslc", "runtime", "calibration", "bench", "torch", "diffusers", "lark", "sympy"},
    "dslc": {"torch", "diffusers", "transformers", "calibration", "bench"},
    "runtime": {"dslc", "lark", "sympy", "calibration", "bench"},
    "calibration": {"bench"},
}


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _may_not_import(module: str) -> set[str]:
    """The top-level packages `module` may never import, lazily or not."""
    forbidden = set(FORBIDDEN.get(module.split(".")[0], ()))
    if _inside(module, "dslc") and module not in DSLC_RUNTIME_TOOLS:
        forbidden.add("runtime")
    if _inside(module, "calibration.plan") and module not in PLAN_TORCH:
        forbidden.add("torch")
    return forbidden


def _may_not_load(module: str) -> set[str]:
    """The top-level packages importing `module` alone may not load (`_may_not_import`, and torch
    for the runtime outside `runtime.measure`)."""
    forbidden = _may_not_import(module)
    if _inside(module, "runtime") and not _inside(module, "runtime.measure"):
        forbidden.add("torch")
    return forbidden


def violations(graph: Graph) -> list[str]:
    """Every import that breaks the layering, and every module whose import alone loads a package
    its layer may not (through the project's own modules' module-level imports)."""
    found = [str(item) for item in graph.imports if item.root in _may_not_import(item.module)]
    for module in graph.paths:
        loaded = graph.eagerly_loaded(module)
        for root in sorted(_may_not_load(module) & {name.split(".")[0] for name in loaded}):
            found.append(f"importing {module} loads {root}")
    return found


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph.read(PACKAGES)


def test_the_layering_holds_for_every_import(graph: Graph) -> None:
    assert violations(graph) == []


def test_the_source_reader_sees_lazy_imports(graph: Graph) -> None:
    lazy = [item for item in graph.imports if not item.eager]
    assert len(lazy) > 50, len(lazy)
    assert any(item.target == "runtime" for item in graph.of("dslc.cli_compile") if not item.eager)


#: Import circles still in the tree, each to be removed, never to grow: none (issue 34 removed the
#: last, runtime.measure's recorder <-> request, with the `RequestOwner` protocol).
KNOWN_CIRCLES: frozenset[tuple[str, str]] = frozenset()


def test_no_module_imports_itself_through_others(graph: Graph) -> None:
    """No import circle between the project's modules, lazy imports included (each one is a
    design knot: two modules that cannot be understood, tested or loaded apart)."""
    circles = set(graph.circles())
    assert circles - KNOWN_CIRCLES == set()


def test_a_circle_is_reported_through_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "dslc/__init__.py": "",
            "dslc/front.py": "from dslc import back\n",
            "dslc/back.py": "def late():\n    from dslc.front import x\n",
            "dslc/one.py": "import typing\nif typing.TYPE_CHECKING:\n    import dslc.two\n",
            "dslc/two.py": "import dslc.three\n",
            "dslc/three.py": "from dslc.one import y\n",
            "dslc/alone.py": "from dslc import front\n",
        },
    )
    assert Graph.read(["dslc"], tmp_path).circles() == [
        ("dslc.back", "dslc.front"),
        ("dslc.one", "dslc.three", "dslc.two"),
    ]


def _room_circles_named(graph: Graph) -> list[str]:
    """Each circle between rooms, with the imports that close it (module:line)."""
    crossing = graph.room_edges()
    named = []
    for circle in graph.room_circles():
        inside = [
            f"{item.module}:{item.line} -> {target}"
            for (here, there), items in sorted(crossing.items())
            if here in circle and there in circle
            for item in items
            for target in sorted(graph.resolve_edge(item))
            if room(target) == there
        ]
        named.append(" <-> ".join(circle) + ": " + "; ".join(inside))
    return named


def test_no_room_imports_itself_through_others(graph: Graph) -> None:
    """No import circle between the sub-packages of a package (its top-level modules each a room of
    their own), lazy imports included: each room can be read, tested and moved apart from the
    rooms that use it (issue 42)."""
    assert _room_circles_named(graph) == []


def test_a_circle_between_rooms_is_named(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "calibration/__init__.py": "",
            "calibration/errors.py": "",
            "calibration/top.py": "from calibration.deep import below\n",
            "calibration/deep/__init__.py": "",
            "calibration/deep/below.py": "def late():\n    from calibration import top\n",
            "calibration/a/__init__.py": "",
            "calibration/a/x.py": "if TYPE_CHECKING:\n    import calibration.b.y\n",
            "calibration/a/sibling.py": "from calibration.a import x\nimport calibration.errors\n",
            "calibration/b/__init__.py": "",
            "calibration/b/y.py": "from calibration.a.x import thing\n",
            "calibration/c/__init__.py": "import calibration.errors\nfrom calibration.b import y\n",
        },
    )
    graph = Graph.read(["calibration"], tmp_path)
    assert graph.room_circles() == [
        ("calibration.a", "calibration.b"),
        ("calibration.deep", "calibration.top"),
    ]
    assert _room_circles_named(graph) == [
        (
            "calibration.a <-> calibration.b: calibration.a.x:2 -> calibration.b.y; "
            "calibration.b.y:1 -> calibration.a.x"
        ),
        (
            "calibration.deep <-> calibration.top: calibration.deep.below:2 -> calibration.top; "
            "calibration.top:1 -> calibration.deep.below"
        ),
    ]


def test_every_runtime_tool_of_the_compiler_exists_and_uses_the_runtime(graph: Graph) -> None:
    for module in sorted(DSLC_RUNTIME_TOOLS):
        assert module in graph.paths, module
        assert any(item.root == "runtime" for item in graph.of(module)), module
    assert PLAN_TORCH <= set(graph.paths), PLAN_TORCH - set(graph.paths)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_a_lazy_import_that_breaks_the_layering_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "runtime/__init__.py": "",
            "runtime/sneaky.py": """
                def compile_on_the_fly():
                    from dslc.compiler import compile_text
                    return compile_text
                """,
            "runtime/dynamic.py": """
                import importlib

                class Late:
                    def load(self):
                        return importlib.import_module("sympy")
                """,
            "runtime/typed.py": """
                from typing import TYPE_CHECKING

                if TYPE_CHECKING:
                    from calibration.calibrate.run import load_pipeline
                """,
        },
    )
    found = violations(Graph.read(["runtime"], tmp_path))
    assert found == [
        "runtime.dynamic:6 imports sympy (lazily)",
        "runtime.sneaky:3 imports dslc.compiler (lazily)",
        "runtime.typed:5 imports calibration.calibrate.run (lazily)",
    ]


def test_torch_loaded_through_a_module_level_chain_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "runtime/__init__.py": "",
            "runtime/lazy.py": "def f():\n    import torch\n",
            "runtime/chain.py": "from runtime import helper\n",
            "runtime/helper.py": "from .measure.hooks import hook\n",
            "runtime/measure/__init__.py": "",
            "runtime/measure/hooks.py": "import torch\n\nhook = torch.nn.Module\n",
        },
    )
    assert violations(Graph.read(["runtime"], tmp_path)) == [
        "importing runtime.chain loads torch",
        "importing runtime.helper loads torch",
    ]


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "artifact/__init__.py": "from . import ir\n",
            "artifact/ir.py": "from .sub import deep\n",
            "artifact/sub/__init__.py": "from ..ir import x\n",
            "artifact/sub/deep.py": "from .. import ir\n",
        },
    )
    graph = Graph.read(["artifact"], tmp_path)
    targets = {(item.module, item.target) for item in graph.imports}
    assert targets == {
        ("artifact", "artifact"),
        ("artifact.ir", "artifact.sub"),
        ("artifact.sub", "artifact.ir"),
        ("artifact.sub.deep", "artifact"),
    }
    assert "artifact.ir" in graph.eagerly_loaded("artifact")
    assert "artifact.sub.deep" in graph.eagerly_loaded("artifact.ir")
    assert graph.resolve(graph.imports[-1]) == ["artifact", "artifact.ir"]


# --------------------------------------------------------------------- each module, alone


ALONE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""

MODULES = sorted(modules(("artifact", "dslc", "runtime", "calibration")))


def _alone(module: str) -> Imported:
    command = [sys.executable, "-c", ALONE, module]
    done = subprocess.run(command, check=False, capture_output=True, text=True, cwd=ROOT)
    return Imported(done.returncode, done.stdout, done.stderr)


#: What the modules allowed torch share, imported once by the forking server (``warm``).
PRELOAD = ("torch",)


@pytest.fixture(scope="module")
def warm() -> Iterator[WarmInterpreter]:
    server = WarmInterpreter(PRELOAD, ROOT)
    yield server
    server.close()


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES)
def test_every_module_imports_alone_in_a_fresh_interpreter(
    module: str, warm: WarmInterpreter, tmp_path: Path
) -> None:
    """A module that may load all the server preloaded is imported in a forked child of it (torch
    imported once, not per module); any other in a new interpreter of its own."""
    done = _alone(module) if _may_not_load(module) & warm.preloaded else warm.run(module, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(json.loads(done.stdout))
    assert not loaded & _may_not_load(module), sorted(loaded & _may_not_load(module))


def test_a_warm_child_fails_as_a_fresh_interpreter_would_and_leaves_nothing(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {"good.py": "import json\n", "bad.py": "import good\nraise ImportError('bad')\n"},
    )
    server = WarmInterpreter(("json",), tmp_path)
    try:
        assert "json" in server.preloaded and "good" not in server.preloaded
        bad = server.run("bad", tmp_path)
        assert bad.returncode == 1 and "ImportError: bad" in bad.stderr and bad.stdout == ""
        good = server.run("good", tmp_path)  # the first child's imports died with it
        assert good.returncode == 0 and "good" in json.loads(good.stdout)
        assert "bad" not in json.loads(good.stdout)
    finally:
        server.close()
