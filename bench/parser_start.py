"""Parser start-up: what `dslc check formulas/` costs with no parser cache and with the JSON
tables of `dslc.parser_cache`, and (given `--old-tree`, a checkout of a commit that still used
Lark's pickle cache) with the pickle; then the load step alone, in this process.

    .venv/bin/python bench/parser_start.py [--rounds 15] [--old-tree /tmp/old]

Each round runs every mode once, in a fresh process, in turn (so a busy machine slows them
alike); the table gives medians of CPU seconds (user + system, the child's own) and wall seconds.
"""

from __future__ import annotations

import argparse
import io
import os
import pickle
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lark
from lark.grammar import Rule
from lark.lexer import TerminalDef

from dslc import parse, parser_cache
from dslc.ast_builder import AstBuilder

COMMAND = ["check", "formulas/"]


def command(tree: Path, cache: str) -> tuple[list[str], dict[str, str]]:
    """`dslc check formulas/` run from `tree`'s code, with this cache folder ('' for none)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "DSLC_CACHE_DIR": cache}
    return [sys.executable, "-c", "from dslc.cli import main; main()", *COMMAND], env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """CPU and wall seconds of one run (its output discarded; it must succeed)."""
    start = time.perf_counter()
    child = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    assert os.waitstatus_to_exitcode(status) == 0, argv
    return usage.ru_utime + usage.ru_stime, wall


def commands(rounds: int, old_tree: Path | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        modes = {"no cache": command(ROOT, ""), "JSON tables": command(ROOT, f"{folder}/json")}
        if old_tree is not None:
            modes["pickle (Lark cache=)"] = command(old_tree, f"{folder}/pickle")
        for argv, env in modes.values():
            timed(argv, env)  # writes the caches
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in modes}
        for _ in range(rounds):
            for name, (argv, env) in modes.items():
                samples[name].append(timed(argv, env))
    print(f"`dslc {' '.join(COMMAND)}`, {rounds} rounds, medians")
    print("| parser tables | CPU s | wall s |\n| --- | ---: | ---: |")
    for name, runs in samples.items():
        cpu = statistics.median(c for c, _ in runs)
        wall = statistics.median(w for _, w in runs)
        print(f"| {name} | {cpu:.3f} | {wall:.3f} |")


def load_step(repeat: int) -> None:
    """Reading the tables back: pickle as Lark's cache did, JSON as `dslc.parser_cache` does."""
    options = {"start": "module", "parser": "lalr", "lexer": "contextual", "strict": True}
    grammar = (ROOT / "dslc/grammar/workload.lark").read_text()
    runtime = {"postlex": parse._Separators(), "transformer": AstBuilder()}

    def build() -> lark.Lark:
        return lark.Lark(grammar, maybe_placeholders=False, **options, **runtime)

    built = build()
    data, memo = built.memo_serialize([TerminalDef, Rule])
    data["options"] = {k: v for k, v in data["options"].items() if k not in parser_cache._NOT_SAVED}
    buffer = io.BytesIO()
    pickle.dump({"data": data, "memo": memo}, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickled = buffer.getvalue()
    with tempfile.TemporaryDirectory() as folder:
        os.environ["DSLC_CACHE_DIR"] = folder
        opts = {**options, "maybe_placeholders": False}
        parser_cache.cached_parser(grammar, opts, **runtime)  # writes it
        text = (Path(folder) / parser_cache.cache_name()).read_bytes()

        def from_json() -> object:
            return parser_cache.cached_parser(grammar, opts, **runtime)

        def from_pickle() -> object:
            return lark.Lark.load(io.BytesIO(pickled))

        cases = {"build": build, "pickle + Lark load": from_pickle, "JSON + Lark load": from_json}
        sizes = f"pickle {len(pickled):,} B, JSON {len(text):,} B"
        print(f"\nload step alone, best of {repeat} ({sizes})")
        print("| parser tables | ms |\n| --- | ---: |")
        for name, case in cases.items():
            best = min(_once(case) for _ in range(repeat))
            print(f"| {name} | {best * 1e3:.1f} |")


def _once(case: object) -> float:
    start = time.perf_counter()
    case()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--old-tree", type=Path, default=None)
    args = parser.parse_args()
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, "
        f"Lark {lark.__version__}\n"
    )
    commands(args.rounds, args.old_tree)
    load_step(args.rounds)


if __name__ == "__main__":
    main()
