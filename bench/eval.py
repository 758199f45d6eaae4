"""Evaluation speed of the runtime: checked and unchecked calls vs a hand-written lambda and sympy.

    .venv/bin/python bench/eval.py [--artifact tests/runtime/data/wan_example.json] [--rounds 15]

One run prints the machine, then one table per formula (median ns per call over interleaved
rounds, and the ratio to the hand-written lambda), then the cost of `import runtime` plus loading
the artifact, measured in fresh interpreters with the bytecode cache warm (as on a deployed
worker) and cold. The runtime never imports sympy; only this benchmark does, for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sympy as sp

import runtime

CLOCK = time.process_time  # CPU time of this process: robust when other jobs share the cores
GOALS = "goals: checked <= 10x lambda, checked >= 10x faster than subs, unchecked <= 2x lambda"


def machine() -> str:
    """`lscpu` model name, cores and Python version, for the table's header."""
    model = "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next(
            line.split(":", 1)[1].strip()
            for line in out.splitlines()
            if line.startswith("Model name")
        )
    except (OSError, subprocess.CalledProcessError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores; Python {platform.python_version()} ({sys.executable})"


def median_ns(variants: dict[str, tuple[str, dict[str, object]]], rounds: int) -> dict[str, float]:
    """Median ns per call of each `(statement, globals)`, timed in interleaved rounds so that load
    drifts hit every variant alike; statements are timed bare, without a wrapping lambda."""
    timers = {
        name: timeit.Timer(stmt, timer=CLOCK, globals=env) for name, (stmt, env) in variants.items()
    }
    numbers = {name: max(1, timer.autorange()[0]) for name, timer in timers.items()}
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, timer in timers.items():
            samples[name].append(timer.timeit(numbers[name]) / numbers[name] * 1e9)
    return {name: statistics.median(values) for name, values in samples.items()}


Case = tuple[str, dict[str, tuple[str, dict[str, object]]], object]


def formulas(book: runtime.FormulaBook) -> list[Case]:
    """Per formula: a label, the statements to time (all computing the same value), the value."""
    wan, minimax = book["wan2_2_t2v_a14b"], book["minimax_h3"]
    steps, frames, height, width = sp.symbols("steps frames height width", integer=True)
    cfg = sp.Symbol("cfg")
    tokens = (sp.floor((frames - 1) / 4) + 1) * sp.floor(height / 16) * sp.floor(width / 16)
    point = {steps: 4, frames: 17, height: 480, width: 832, cfg: True}
    cases: list[Case] = []

    def add(
        label: str,
        checked: str,
        raw: object,
        hand: object,
        expr: sp.Expr,
        syms: tuple[sp.Symbol, ...],
    ) -> None:
        env = {
            "wan": wan, "minimax": minimax, "raw": raw, "hand": hand, "expr": expr,
            "lambdified": sp.lambdify(syms, expr, modules="math"),
            "sub": {s: point[s] for s in syms},
        }  # fmt: skip
        args = ", ".join(repr(point[s]) for s in syms)
        variants = {
            "hand-written lambda": (f"hand({args})", env),
            "unchecked compiled_*()": (f"raw({args})", env),
            "checked call": (checked, env),
            "sympy.lambdify (math)": (f"lambdified({args})", env),
            "sympy subs": ("expr.subs(sub)", env),
        }
        results = {name: eval(stmt, env) for name, (stmt, env) in variants.items()}
        assert len({int(v) for v in results.values()}) == 1, results  # all compute the same number
        cases.append((label, variants, results["checked call"]))

    symbols = (steps, frames, height, width, cfg)
    add('wan2_2_t2v_a14b iterations("DenoisingStage", steps=4)  [steps]',
        'wan.iterations("DenoisingStage", steps=4)', wan.compiled_iterations("DenoisingStage"),
        lambda steps, frames, height, width, cfg: steps, steps, symbols)  # fmt: skip
    add('minimax_h3 iterations("DenoisingStage", steps=4)  [steps - 1]',
        'minimax.iterations("DenoisingStage", steps=4)',
        minimax.compiled_iterations("DenoisingStage"),
        lambda steps: steps - 1, steps - 1, (steps,))  # fmt: skip
    add('wan2_2_t2v_a14b time("DenoisingStage", frames=17, height=480, width=832)'
        "  [tokens * (if cfg then 2 else 1)]",
        'wan.time("DenoisingStage", frames=17, height=480, width=832)',
        wan.compiled_time("DenoisingStage"),
        lambda steps, frames, height, width, cfg: (
            ((frames - 1) // 4 + 1) * (height // 16) * (width // 16) * (2 if cfg else 1)
        ),
        tokens * sp.Piecewise((2, cfg), (1, True)), symbols)  # fmt: skip
    return cases


LOAD_SCRIPT = """
import sys, time, json
w0, c0 = time.perf_counter(), time.process_time()
import runtime
w1, c1 = time.perf_counter(), time.process_time()
runtime.load_formulas(sys.argv[1])
w2, c2 = time.perf_counter(), time.process_time()
heavy = [m for m in ("lark", "sympy", "torch") if m in sys.modules]
ms = {"import": (w1 - w0) * 1e3, "load": (w2 - w1) * 1e3, "cpu": (c2 - c0) * 1e3}
print(json.dumps({**ms, "heavy": heavy}))
"""


def import_and_load(artifact: Path, runs: int, cached: bool) -> dict[str, float]:
    """Median ms (wall) of `import runtime`, of loading and of both, and the CPU ms of both, each
    run in a fresh interpreter; CPU time is what a busy machine cannot inflate by descheduling us.
    """
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        if cached:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = cache  # keeps .pyc files out of the repository
        else:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            env["PYTHONPYCACHEPREFIX"] = os.path.join(cache, "never-written")
        command = [sys.executable, "-c", LOAD_SCRIPT, str(artifact)]
        reports = []
        for i in range(runs + (1 if cached else 0)):
            out = subprocess.run(
                command, capture_output=True, text=True, check=True, env=env, cwd=ROOT
            ).stdout
            if i or not cached:  # the first cached run only writes the cache
                reports.append(json.loads(out))
    assert all(not r["heavy"] for r in reports), reports
    result = {key: statistics.median(r[key] for r in reports) for key in ("import", "load", "cpu")}
    result["total"] = statistics.median(r["import"] + r["load"] for r in reports)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--artifact", type=Path, default=ROOT / "tests/runtime/data/wan_example.json"
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--load-runs", type=int, default=15)
    options = parser.parse_args()
    book = runtime.load_formulas(options.artifact)
    print(f"machine: {machine()}")
    artifact = options.artifact
    print(f"artifact: {artifact.relative_to(ROOT) if artifact.is_relative_to(ROOT) else artifact}")
    print(
        f"timing: median of {options.rounds} interleaved rounds of CPU time (process_time), each "
        "autoranged"
    )
    print(GOALS)
    for label, variants, value in formulas(book):
        times = median_ns(variants, options.rounds)
        hand, subs, checked = (
            times["hand-written lambda"],
            times["sympy subs"],
            times["checked call"],
        )
        print(f"\n{label} = {value}")
        print(f"| {'variant':<24} | {'ns/call':>10} | {'x lambda':>8} | {'subs / this':>11} |")
        print(f"| {'-' * 24} | {'-' * 10}:| {'-' * 8}:| {'-' * 11}:|")
        for name, ns in times.items():
            print(f"| {name:<24} | {ns:>10,.0f} | {ns / hand:>8.1f} | {subs / ns:>11.1f} |")
        unchecked = times["unchecked compiled_*()"]
        ok = checked <= 10 * hand and subs >= 10 * checked and unchecked <= 2 * hand
        print(
            f"goals met: {'yes' if ok else 'NO'} (checked {checked / hand:.1f}x lambda, "
            f"{subs / checked:.0f}x faster than subs; unchecked {unchecked / hand:.2f}x lambda)"
        )
    print(
        "\nimport runtime + load_formulas(artifact) in a fresh interpreter, median ms"
        " (goal: total <= 30 ms; lark, sympy and torch stay unloaded)"
    )
    print(
        f"| {'bytecode cache':<16} | {'import':>7} | {'load':>7} | {'total':>7} | "
        f"{'CPU total':>9} |"
    )
    print(f"| {'-' * 16} | {'-' * 6}:| {'-' * 6}:| {'-' * 6}:| {'-' * 8}:|")
    for cached in (True, False):
        r = import_and_load(options.artifact, options.load_runs, cached)
        name = "warm (deployed)" if cached else "cold (none)"
        print(
            f"| {name:<16} | {r['import']:>7.1f} | {r['load']:>7.1f} | {r['total']:>7.1f} | "
            f"{r['cpu']:>9.1f} |"
        )
    load = os.getloadavg()
    print(f"\nload average during the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
