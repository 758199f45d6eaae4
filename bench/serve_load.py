"""Load and fault test of the serving worker: a seeded mixed-shape trace over loopback HTTP, faults
injected, a SIGTERM mid-request, and throughput beside two policies without exact admission.

    .venv/bin/python bench/serve_load.py [--examples flux sdxl] [--requests 40] [--seed 0]

(sdxl: about 4 minutes for 12 requests on a loaded 2-core CPU; flux, the default, fewer)

Per example (the tiny example on the CPU, validated for a target under a capacity cap): the worker
behind a real uvicorn on 127.0.0.1 (a thread of this process, a free port) gets the trace from a
few concurrent clients: most small, some at the target, a few larger than it (re-placed or too
large), some inadmissible (a broken contract, out of range, an unknown param, a wrong type),
clients that disconnect mid-request, requests that raise mid-denoise and an injected
out-of-memory error (``calibration.lifecycle.faults`` on the worker's memory backend, keyed on the
request's shape: set from Python, never from HTTP). Then, on the same worker and trace in-process,
the throughput of admission beside (a) the placement planned for the trace's largest shape with no
admission and (b) ComfyUI's area x factor rule (``bench/serve_load_policies.py``). Last, `dslc
serve` in a process of its own gets a SIGTERM while a request runs and two wait.

Figures (the exit status is 0 only when every one holds): 0 out-of-memory errors on a request
admission let run (the injected one aside), 0 requests lost or hung (each gets an answer, or its
client disconnected as planned), every refusal a 4xx naming the limit, every measured peak within
capacity - reserve, the tracked memory back to its baseline after every failure.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.serve_load_core import EXAMPLE_SETUPS, Figures
from bench.serve_load_policies import PolicyRow
from bench.serve_load_run import load_test
from bench.serve_load_sigterm import SigtermFigures, sigterm_figures


def _figure_rows(example: str, figures: Figures | SigtermFigures) -> list[str]:
    return [
        f"| {example} | {name} | {value} | {want} | {'yes' if ok else 'NO'} |"
        for name, value, want, ok in figures.rows()
    ]


def _policy_rows(example: str, rows: list[PolicyRow]) -> list[str]:
    base = next(r for r in rows if r.policy == "admission").per_s
    return [
        f"| {example} | {r.policy} | {r.ok} | {r.refused} | {r.oom} | {r.seconds:.2f} | "
        f"{r.per_s:.2f} | {r.per_s / base:.2f}x |"
        for r in rows
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=["flux"], choices=list(EXAMPLE_SETUPS))
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--no-sigterm", action="store_true", help="Skip the dslc serve process.")
    parser.add_argument(
        "--serve-device",
        default="cpu",
        help="The dslc serve process's --device (bench/gpu.sh: cuda, a served trace on the GPU).",
    )
    args = parser.parse_args()
    python = sys.version.split()[0]
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}; python {python}")
    figures, policies = [], []
    held = True
    for example in args.examples:
        result = load_test(example, args.requests, args.seed, args.clients)
        figures += _figure_rows(example, result.figures)
        policies += _policy_rows(example, result.policies)
        held = held and result.figures.hold
    if not args.no_sigterm:
        sig = sigterm_figures(args.serve_device)
        figures += _figure_rows(f"flux (dslc serve, {args.serve_device})", sig)
        held = held and sig.hold
    print("| example | figure | measured | wanted | holds |")
    print("| --- | --- | ---: | --- | --- |")
    print("\n".join(figures))
    print()
    print("| example | policy | served ok | refused | OOM | seconds | ok / s | vs admission |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(policies))
    print(f"\nevery figure holds: {'yes' if held else 'NO'}")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
