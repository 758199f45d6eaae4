"""Verdicts of every built-in example, run after run: the findings, the bounds and the exit status.

Runs ``dslc calibrate --example NAME --verify --json`` (exactly what a user runs) ``--runs`` times
per example and prints, per example, the findings of each run (the same in every run, and none to
act on, on the project's own formulas), how far the bounds sit above the measured peaks (the
evidence margins, never under, within +5 %) beside what the fixed margin alone gives, the largest
raw error, the extra sizes' cost and the request time's error against its two sigma.

    .venv/bin/python bench/verdicts.py                      # every example, 5 runs each
    .venv/bin/python bench/verdicts.py --examples wan flux --runs 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration.examples import EXAMPLES


def run_once(example: str) -> dict[str, Any]:
    """One `dslc calibrate --verify --json` run: its document, exit status and seconds."""
    dslc = Path(sys.executable).parent / "dslc"
    start = time.perf_counter()
    done = subprocess.run(
        [str(dslc), "calibrate", "--example", example, "--verify", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    seconds = time.perf_counter() - start
    try:
        doc = json.loads(done.stdout)
    except json.JSONDecodeError:
        doc = {}
    return {"status": done.returncode, "seconds": seconds, "doc": doc, "stderr": done.stderr}


def _entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    request = dict(doc["request"], label="request")
    return [e for e in [*doc["phases"], request] if e.get("measured_peak_bytes")]


def summary(run: dict[str, Any]) -> dict[str, Any]:
    """The figures one run is judged by."""
    doc = run["doc"]
    if not doc:
        return {"status": run["status"], "error": run["stderr"].strip().splitlines()[-1:]}
    entries = _entries(doc)
    over = [e["bound_peak_bytes"] / e["measured_peak_bytes"] - 1 for e in entries]
    fixed = [
        e["fixed_margin_bound_bytes"] / e["measured_peak_bytes"] - 1
        for e in entries
        if e.get("fixed_margin_bound_bytes")
    ]
    raw = [abs(e["predicted_peak_bytes"] / e["measured_peak_bytes"] - 1) for e in entries]
    findings = sorted(f"{f['kind']}:{f['stage']}:{f['quantity']}" for f in doc["findings"])
    time_error = doc["request"]["time_error"]
    two_sigma = doc["request"]["two_sigma_ms"]
    predicted = doc["request"]["predicted_ms"]
    return {
        "status": run["status"],
        "seconds": round(run["seconds"], 1),
        "findings": findings,
        "actionable": [f["kind"] for f in doc["findings"] if f["actionable"]],
        "bound_over_min": min(over),
        "bound_over_max": max(over),
        "fixed_over_max": max(fixed, default=None),
        "raw_max": max(raw),
        "extra_cost": doc["extra_cost"],
        "time_error": time_error,
        "time_within": (
            None
            if time_error is None or two_sigma is None or not predicted
            else abs(time_error) <= two_sigma / predicted
        ),
        "work_ratio": doc["work_ratio"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="*", default=list(EXAMPLES))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write every run's summary here")
    args = parser.parse_args()
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"# {platform.node()}: {os.cpu_count()} CPUs, load {load}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(
        "| example | run | exit | findings | bound over measured (min .. max) "
        "| fixed margin (max) | raw (max) | extra cost | time (2 sigma) | s |"
    )
    print("| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | --- | ---: |")
    results: dict[str, list[dict[str, Any]]] = {}
    failed = False
    for example in args.examples:
        results[example] = []
        for k in range(args.runs):
            s = summary(run_once(example))
            results[example].append(s)
            if "error" in s:
                print(f"| {example} | {k + 1} | {s['status']} | {s['error']} | | | | | | |")
                failed = True
                continue
            within = {True: "within", False: "outside", None: "-"}[s["time_within"]]
            fixed = "-" if s["fixed_over_max"] is None else f"{s['fixed_over_max']:+.1%}"
            time_error = "-" if s["time_error"] is None else f"{s['time_error']:+.1%}"
            print(
                f"| {example} | {k + 1} | {s['status']} | {', '.join(s['findings']) or 'none'} "
                f"| {s['bound_over_min']:+.2%} .. {s['bound_over_max']:+.2%} | {fixed} "
                f"| {s['raw_max']:.2%} | {s['extra_cost']:.2f}x | {time_error} ({within}) "
                f"| {s['seconds']:.0f} |"
            )
            sys.stdout.flush()
            failed |= bool(s["status"]) or bool(s["actionable"]) or s["bound_over_min"] < 0
        memory = {
            tuple(f for f in s.get("findings", []) if ":memory" in f) for s in results[example]
        }
        print(f"<!-- {example}: memory findings the same in every run: {len(memory) == 1} -->")
        failed |= len(memory) != 1
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'some verdicts failed' if failed else 'every verdict holds'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
