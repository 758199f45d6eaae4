"""`import runtime` and loading an artifact stay light: no lark, sympy or torch."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from runtime import load_formulas

from .conftest import WAN_PATH

SCRIPT = """
import sys, json
import runtime
book = runtime.load_formulas(sys.argv[1])
assert book["wan2_2_t2v_a14b"].iterations("DenoisingStage", steps=4) == 4
names = ("lark", "sympy", "torch", "numpy", "runtime.measure", "runtime.record")
heavy = sorted(m for m in names if m in sys.modules)
print(json.dumps({"heavy": heavy}))
"""


def test_import_and_load_do_not_pull_heavy_modules() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(WAN_PATH)], capture_output=True, text=True, check=True
    )
    report = json.loads(out.stdout)
    assert report["heavy"] == []
    # The time (budget 30 ms) is bench/eval.py's: a test on a shared machine bounds modules, not ms.


# What `import runtime` plus a load may add to a fresh interpreter's modules (site's own are not
# counted): the runtime itself and the artifact contract, json and fractions. Writing files
# (tempfile, shutil), threading, typing, inspect, re, enum... would cost the serving worker's
# start-up milliseconds each.
ALLOWED = {
    "_decimal", "_json", "_operator", "_stat", "_thread", "collections.abc", "decimal",
    "fractions", "gc", "json", "json.decoder", "json.encoder", "json.scanner", "math", "numbers",
    "operator", "stat",
}  # fmt: skip

MODULES = """
import json, sys
before = set(sys.modules)
import runtime
book = runtime.load_formulas(sys.argv[1])
loaded = sorted(set(sys.modules) - before)
for name in book:
    book[name].evaluate()
print(json.dumps([loaded, sorted(set(sys.modules) - before)]))
"""


def test_import_and_load_add_only_the_runtime_json_and_fractions() -> None:
    out = subprocess.run(
        [sys.executable, "-c", MODULES, str(WAN_PATH)], capture_output=True, text=True, check=True
    )
    loaded, used = map(set, json.loads(out.stdout))
    assert "runtime.formulas" in loaded  # the check saw the import
    added = loaded | used
    ours = ("runtime", "artifact")  # the runtime and the artifact contract it reads
    extra = {m for m in added if m.split(".")[0] not in ours} - ALLOWED
    assert not extra, f"import runtime + load pulls in {sorted(extra)}"


# Loading validates and bounds every pipeline and checks its default workload by walking the
# trees; code is generated and compiled only for the pipelines a caller uses, each once.
COMPILES = """
import builtins, json, sys
import runtime
calls = []
real = builtins.compile
def counting(*args, **kwargs):
    if args[1] == "<workload formulas>":  # the runtime's generated code, not module imports
        calls.append(args[1])
    return real(*args, **kwargs)
builtins.compile = counting
book = runtime.load_formulas(json.loads(sys.argv[1]))
counts = [len(calls)]
first, same, other = book["wan2_2_t2v_a14b"], book["copy"], book["other"]
assert first.iterations("DenoisingStage", steps=4) == 4
first.evaluate(steps=3)
first.is_admissible(steps=5)
first.violations(steps=0)
counts.append(len(calls))
same.evaluate()  # the same formulas: compiled already
counts.append(len(calls))
other.memory("DenoisingStage")
other.evaluate()
counts.append(len(calls))
print(json.dumps(counts))
"""


def test_code_is_compiled_on_first_use_once_per_pipeline() -> None:
    doc = json.loads(WAN_PATH.read_text())
    wan = doc["pipelines"][0]
    stages = [dict(wan["stages"][0], time={"expr": {"k": "int", "v": 7}, "span": None})]
    doc["pipelines"].append(dict(wan, name="copy"))
    doc["pipelines"].append(dict(wan, name="other", stages=stages + wan["stages"][1:]))
    out = subprocess.run(
        [sys.executable, "-c", COMPILES, json.dumps(doc)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == [0, 1, 1, 2]


def test_first_use_from_many_threads_builds_one_set_of_closures() -> None:
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    wan = load_formulas(WAN_PATH)["wan2_2_t2v_a14b"]
    barrier = Barrier(8)

    def first_use(steps: int) -> tuple[Any, ...]:
        barrier.wait()  # all threads reach the pipeline's first use together
        iterations = wan.iterations("DenoisingStage", steps=steps)
        return iterations, wan.evaluate(steps=steps), wan.iterations

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(first_use, range(1, 9)))
    assert [r[0] for r in results] == list(range(1, 9))
    assert [r[1]["DenoisingStage"].iterations for r in results] == list(range(1, 9))
    assert all(r[2] is wan.iterations for r in results[1:])  # one fast entry, built once


def test_loading_pauses_the_collector_and_restores_it() -> None:
    import gc

    from runtime import ArtifactError

    assert gc.isenabled()
    load_formulas(WAN_PATH)
    assert gc.isenabled()
    with pytest.raises(ArtifactError):
        load_formulas("{}")
    assert gc.isenabled()  # resumed after a failed load too
    gc.disable()
    try:
        load_formulas(WAN_PATH)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
