"""Artifact load time and peak memory against artifact size, up to the loader's node limit.

    .venv/bin/python bench/load.py

First the real artifact (`formulas/`): `import runtime` plus `load_formulas` in fresh processes
(best and median of `--runs`), with the bytecode cache warm (as a deployed worker has it: a
`PYTHONPYCACHEPREFIX` folder filled by one warm-up run) and without one (`-B`: the runtime's
modules compiled from source, this sandbox's default). Then generated artifacts of growing
size, loaded in this process (best of `--repeat`; peak memory by tracemalloc, a separate run):
copies of the real pipelines (renamed) up to the pipeline limit, and pipelines of wide formulas up
to the node limit (`MAX_NODES`). `load ms` validates, bounds and checks every default workload;
`use all ms` is the first use of every pipeline after that (generating and compiling its code,
which the loader defers). Linear growth shows as a steady time and memory per node.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from artifact.limits import MAX_NODES, MAX_PIPELINES
from dslc.fuzzing import artifacts as artifact_fuzz
from runtime import load_formulas

FRESH = (
    "import time; t = time.perf_counter(); import runtime; i = time.perf_counter(); "
    "runtime.load_formulas({path!r}); print(i - t, time.perf_counter() - i)"
)


def nodes(value: Any) -> int:
    """Expression nodes as the loader counts them (the args of every compound node)."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("args"), list):
                count += len(item["args"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def copies(doc: dict[str, Any], count: int) -> dict[str, Any]:
    """The real pipelines repeated `count` times, renamed (and their `extends` with them)."""
    out = copy.deepcopy(doc)
    out["pipelines"] = []
    for i in range(count):
        for p in doc["pipelines"]:
            q = copy.deepcopy(p)
            q["name"] = f"{p['name']}_{i}"
            q["extends"] = None if p["extends"] is None else f"{p['extends']}_{i}"
            out["pipelines"].append(q)
    return out


def wide(doc: dict[str, Any], pipelines: int, args: int) -> dict[str, Any]:
    """`pipelines` copies of the first real pipeline, each with a let `max(steps + 0, ...)` of
    `args` args used by every stage's time."""
    base = doc["pipelines"][0]
    out = copy.deepcopy(doc)
    out["pipelines"] = []
    steps = {"k": "param", "name": "steps"}
    for i in range(pipelines):
        p = copy.deepcopy(base)
        p["name"] = f"wide_{i}"
        terms = [{"k": "add", "args": [steps, {"k": "int", "v": j}]} for j in range(args)]
        p["lets"] = p["lets"] + [
            {"name": "wide", "expr": {"k": "max", "args": terms}, "span": None}
        ]
        p["lets"][-1]["span"] = p["span"]
        for stage in p["stages"]:
            stage["time"] = {"expr": {"k": "let", "name": "wide"}, "span": None}
        out["pipelines"].append(p)
    return out


def measure(doc: dict[str, Any], repeat: int) -> tuple[float, float, float, int]:
    """(best load seconds, best first-use-of-all seconds, peak MiB, bytes) of loading the
    document's JSON text, then using every pipeline once."""
    text = json.dumps(doc)
    loads, uses = zip(*(_timed(text) for _ in range(repeat)))
    tracemalloc.start()
    book = load_formulas(text)
    for name in book:
        book[name].source  # noqa: B018  # first use: generate and compile its code
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return min(loads), min(uses), peak / 2**20, len(text)


def _timed(text: str) -> tuple[float, float]:
    start = time.perf_counter()
    book = load_formulas(text)
    loaded = time.perf_counter()
    for name in book:
        book[name].source  # noqa: B018
    return loaded - start, time.perf_counter() - loaded


def fresh(doc: dict[str, Any], runs: int, cached: bool) -> list[tuple[float, float]]:
    """`(import, load)` seconds of each run, each in a new interpreter; `cached`: with a warm
    bytecode cache (under a fresh prefix), else without one (`-B`, from a copy of the runtime
    without `__pycache__` folders: its modules compile from source; the standard library keeps
    its installed bytecode)."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "formulas.json")
        Path(path).write_text(json.dumps(doc))
        skip = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
        env = {k: v for k, v in os.environ.items() if k not in skip}
        where = str(ROOT)
        if cached:
            env["PYTHONPYCACHEPREFIX"] = os.path.join(folder, "pycache")
        else:  # `python -c` imports from its working folder first: the copy, not the checkout
            where = os.path.join(folder, "checkout")
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(ROOT / "runtime", os.path.join(where, "runtime"), ignore=ignore)
        command = [sys.executable, *([] if cached else ["-B"]), "-c", FRESH.format(path=path)]
        if cached:  # the warm-up run writes every module's bytecode under the prefix
            subprocess.run(command, capture_output=True, check=True, cwd=where, env=env)
        times = []
        for _ in range(runs):
            out = subprocess.run(
                command, capture_output=True, text=True, check=True, cwd=where, env=env
            )
            imported, loaded = out.stdout.split()
            times.append((float(imported), float(loaded)))
    return times


def report_fresh(doc: dict[str, Any], runs: int) -> None:
    """The fresh-process table: import, load and both, best and median of `runs`."""
    print(f"import runtime + load_formulas(real artifact), fresh process, {runs} runs (ms):")
    print(f"{'bytecode cache':<16}{'import':>8}{'load':>8}{'best':>8}{'median':>8}")
    for cached in (True, False):
        times = fresh(doc, runs, cached)
        totals = sorted(i + lo for i, lo in times)
        imports = statistics.median(t[0] for t in times) * 1e3
        loads = statistics.median(t[1] for t in times) * 1e3
        print(
            f"{'warm' if cached else 'none':<16}{imports:>8.1f}{loads:>8.1f}"
            f"{totals[0] * 1e3:>8.1f}{statistics.median(totals) * 1e3:>8.1f}"
        )


ONE = (
    "import resource, sys, time; sys.path.insert(0, {root!r}); from runtime import load_formulas; "
    "text = open({path!r}).read(); r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
    "t = time.process_time(); book = load_formulas(text); l = time.process_time(); "
    "r1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; book['wide_0'].evaluate(); "
    "e = time.process_time(); r2 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
    "print(l - t, e - l, (r1 - r0) / 1024, (r2 - r1) / 1024)"
)


def report_one_formula(doc: dict[str, Any], runs: int) -> None:
    """One pipeline whose let is a single `max` of as many terms as the node limit allows (a
    tampered artifact: the compiler's bounds make none so wide): its load, then its first
    `evaluate()` (generating and compiling its code), each in a fresh process; peak RSS growth
    (tracemalloc slows `compile()` a hundredfold on a formula this wide)."""
    base = nodes(wide(doc, 1, 0))
    case = wide(doc, 1, (MAX_NODES - base) // 3)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "one.json")
        Path(path).write_text(json.dumps(case))
        command = [sys.executable, "-c", ONE.format(root=str(ROOT), path=path)]
        rows = [
            [float(x) for x in subprocess.run(command, capture_output=True, text=True, check=True)
             .stdout.split()]
            for _ in range(runs)
        ]  # fmt: skip
    load, first, load_mib, first_mib = (statistics.median(r[i] for r in rows) for i in range(4))
    print(
        f"one formula at the node limit ({nodes(case):,} nodes), median of {runs} fresh runs: "
        f"load {load * 1e3:.0f} ms CPU (+{load_mib:.0f} MiB RSS), first evaluate() "
        f"{first * 1e3:.0f} ms CPU (+{first_mib:.0f} MiB RSS)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes for the real one")
    parser.add_argument("--repeat", type=int, default=3, help="loads per generated size")
    parser.add_argument("--one-only", action="store_true", help="stop after the one formula")
    args = parser.parse_args(argv)
    doc = artifact_fuzz.real_artifact(str(ROOT / "formulas"))
    pipelines = doc["pipelines"]
    real = len(pipelines) if isinstance(pipelines, list) else 0
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, CPython "
        f"{platform.python_version()}; real artifact: {real} pipelines, {nodes(doc):,} nodes"
    )
    report_fresh(doc, args.runs)
    report_one_formula(doc, 3)
    if args.one_only:
        return 0
    print(f"{'artifact':<22}{'pipelines':>10}{'nodes':>9}{'KiB':>8}{'load ms':>9}{'us/node':>9}"
          f"{'use all ms':>11}{'us/node':>9}{'peak MiB':>10}{'B/node':>8}")  # fmt: skip
    cases = [(f"real x{k}", copies(doc, k)) for k in (1, 5, 15, MAX_PIPELINES // real)]
    per = nodes(wide(doc, 1, 1000))
    for count in (5, 15, 35, MAX_NODES // per):
        cases.append((f"wide 1000 x{count}", wide(doc, count, 1000)))
    for name, case in cases:
        n = nodes(case)
        seconds, use, peak, size = measure(case, args.repeat)
        print(
            f"{name:<22}{len(case['pipelines']):>10}{n:>9,}{size / 1024:>8.0f}{seconds * 1e3:>9.1f}"
            f"{seconds * 1e6 / n:>9.1f}{use * 1e3:>11.1f}{use * 1e6 / n:>9.1f}{peak:>10.1f}"
            f"{peak * 2**20 / n:>8.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
