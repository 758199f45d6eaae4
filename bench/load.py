"""Artifact load time and peak memory against artifact size, up to the loader's node limit.

    .venv/bin/python bench/load.py

First the real artifact (`formulas/`): `import runtime` plus `load_formulas` in a fresh process,
best of several runs. Then generated artifacts of growing size, loaded in this process (best of
three; peak memory by tracemalloc, a separate run): copies of the real pipelines (renamed) up to
the pipeline limit, and pipelines of wide formulas up to the 200,000-node limit. Linear growth shows
as a steady time and memory per node.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dslc import fuzzing
from runtime import load_formulas
from runtime.limits import MAX_NODES, MAX_PIPELINES

FRESH = (
    "import time; t = time.perf_counter(); import runtime; "
    "runtime.load_formulas({path!r}); print(time.perf_counter() - t)"
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


def measure(doc: dict[str, Any], repeat: int) -> tuple[float, float, int]:
    """(best load seconds, peak MiB, bytes) of loading the document's JSON text."""
    text = json.dumps(doc)
    best = min(_timed(text) for _ in range(repeat))
    tracemalloc.start()
    load_formulas(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return best, peak / 2**20, len(text)


def _timed(text: str) -> float:
    start = time.perf_counter()
    load_formulas(text)
    return time.perf_counter() - start


def fresh(doc: dict[str, Any], runs: int) -> float:
    """Best `import runtime` + load time, each in a new interpreter."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "formulas.json")
        Path(path).write_text(json.dumps(doc))
        times = []
        for _ in range(runs):
            out = subprocess.run(
                [sys.executable, "-c", FRESH.format(path=path)],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            times.append(float(out.stdout))
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh processes for the real one")
    parser.add_argument("--repeat", type=int, default=3, help="loads per generated size")
    args = parser.parse_args(argv)
    doc = fuzzing.real_artifact(str(ROOT / "formulas"))
    real = len(doc["pipelines"])
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, CPython "
        f"{platform.python_version()}; real artifact: {real} pipelines, {nodes(doc):,} nodes"
    )
    print(f"import runtime + load (fresh process, best of {args.runs}): "
          f"{fresh(doc, args.runs) * 1e3:.1f} ms")  # fmt: skip
    print(f"{'artifact':<22}{'pipelines':>10}{'nodes':>9}{'KiB':>8}{'load ms':>9}"
          f"{'us/node':>9}{'peak MiB':>10}{'B/node':>8}")  # fmt: skip
    cases = [(f"real x{k}", copies(doc, k)) for k in (1, 5, 15, MAX_PIPELINES // real)]
    per = nodes(wide(doc, 1, 1000))
    for count in (5, 15, 35, MAX_NODES // per):
        cases.append((f"wide 1000 x{count}", wide(doc, count, 1000)))
    for name, case in cases:
        n = nodes(case)
        seconds, peak, size = measure(case, args.repeat)
        print(
            f"{name:<22}{len(case['pipelines']):>10}{n:>9,}{size / 1024:>8.0f}{seconds * 1e3:>9.1f}"
            f"{seconds * 1e6 / n:>9.1f}{peak:>10.1f}{peak * 2**20 / n:>8.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
