"""Peak memory of `dslc calibrate --example NAME` on every tiny example, this tree beside another.

Issue 31 asks that calibrating under offload, the storage attribution and the accounting of every
component raise the calibrate CLI's peak RSS on the tiny examples by no more than 10 %. Each round
runs every example once from each tree, in turn, in a fresh process (``os.wait4``: the child's own
peak RSS and CPU seconds); the table gives medians and the ratio this tree / the other.

    .venv/bin/python bench/calibrate_rss.py --before /tmp/old [--rounds 3] [--examples flux wan]

``--before`` is a checkout of an older commit (``git worktree add --detach /tmp/old e30ab8c``);
its code runs through ``PYTHONPATH``, with this virtual environment's packages.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration.examples import EXAMPLES

#: Over this ratio of the older tree's peak RSS the change costs too much memory (issue 31).
LIMIT = 1.10


def command(tree: Path, example: str) -> tuple[list[str], dict[str, str]]:
    """`dslc calibrate --example NAME` run from ``tree``'s code."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    code = "from dslc.cli import main; main()"
    return [sys.executable, "-c", code, "calibrate", "--example", example], env


def measured(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Peak RSS (MiB) and CPU seconds of one run in a fresh process; it must succeed."""
    child = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(argv[3:])} exited {code} (PYTHONPATH={env['PYTHONPATH']})")
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of an older commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--examples", nargs="*", default=list(EXAMPLES))
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": ROOT}
    samples = {(t, e): [] for t in trees for e in args.examples}
    for k in range(args.rounds):
        for example in args.examples:
            for name, tree in trees.items():
                samples[name, example].append(measured(*command(tree, example)))
        print(f"round {k + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; medians of {args.rounds} fresh runs; "
        f"before = {args.before}"
    )
    print(f"{'example':<10} {'RSS before':>11} {'RSS after':>10} {'ratio':>6} {'CPU s b/a':>12}")
    worst = 0.0
    for example in args.examples:
        before, after = samples["before", example], samples["after", example]
        rss_b = statistics.median(s[0] for s in before)
        rss_a = statistics.median(s[0] for s in after)
        cpu_b = statistics.median(s[1] for s in before)
        cpu_a = statistics.median(s[1] for s in after)
        worst = max(worst, rss_a / rss_b)
        print(
            f"{example:<10} {rss_b:>8.0f} MiB {rss_a:>6.0f} MiB {rss_a / rss_b:>6.3f}"
            f" {cpu_b:>5.1f} / {cpu_a:<5.1f}"
        )
    verdict = "within" if worst <= LIMIT else "OVER"
    print(f"largest ratio {worst:.3f}: {verdict} the {LIMIT:.2f} limit")
    sys.exit(0 if worst <= LIMIT else 1)


if __name__ == "__main__":
    main()
