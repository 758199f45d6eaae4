"""One request prediction's cost (``calibration.serve.predictor``) on every example, beside the
formulas' own checked evaluation (``Pipeline.evaluate``: what the loader serves, for scale).

    .venv/bin/python bench/predict.py [--examples flux,wan] [--calls 20000] [--runs 5]

Each example is calibrated once at its default shapes (one round, no time probe), its predictor
built; then ``--calls`` predictions, each timed alone in this thread's CPU time (the machine is
shared: wall time would time the neighbours). ``warm``: requests from a fixed mix (the target, the
probe, and points between and beyond them along the probe axes), the predictor keeping each
request's figures, as a worker serving repeated shapes does. ``cold``: admissible requests drawn
at random (seeded; each int param between half its smaller and twice its larger calibrated
value, moved down to an admissible one: covered, fitted and scaled phases all come), up to
``--shapes`` distinct ones, and the predictor forgets what it kept before every call (outside
the timing): each prediction is of a shape it has not seen, evaluating the formulas and every
phase model afresh. ``evaluate``: the formulas' checked evaluation at the cold requests. All
three series are timed ``--runs`` times, interleaved; the table gives the median p50, and the
best and the median p99 over the runs. Goal: p99 <= 50 us.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration.examples import EXAMPLES
from calibration.plan.inputs import components_from_bytes, from_estimate
from calibration.plan.model import Device
from calibration.plan.solver import solve
from calibration.serve.predictor import from_calibration
from tests.calibration.examples.calibrated import calibrated_example

GOAL_US = 50.0


def _requests(target: dict, probe: dict) -> list[dict]:
    """The target, the probe, and each int param moved to its probe value, halfway and 1.5x."""
    out = [dict(target), dict(probe)]
    for name, value in target.items():
        if isinstance(value, bool) or value == probe.get(name):
            continue
        low = probe[name]
        for moved in ((low + value) // 2, value + (value - low) // 2):
            out.append({**target, name: moved})
    return out


def _new_shapes(pipeline, target: dict, probe: dict, count: int) -> list[dict]:
    """Up to ``count`` distinct admissible requests drawn at random (seeded): each int param
    between half its smaller and twice its larger calibrated value, then moved down to its
    largest admissible value (``Pipeline.largest_admissible``, the others at their defaults);
    each bool either way; the requests the others' contracts refuse are left out."""
    rng = random.Random(40)
    seen: set[tuple] = set()
    out: list[dict] = []
    for _ in range(20 * count):
        if len(out) == count:
            break
        request = {}
        for name, value in target.items():
            if isinstance(value, bool):
                request[name] = rng.random() < 0.5
            else:
                low, high = sorted((value, probe.get(name, value)))
                request[name] = rng.randint(max(1, low // 2), 2 * high + 1)
        for name, value in request.items():
            if not isinstance(value, bool):  # its own contracts, the others at their defaults
                request[name] = pipeline.largest_admissible(name, value) or 0
        key = tuple(request.items())
        if key not in seen and pipeline.is_admissible(**request):
            seen.add(key)
            out.append(request)
    return out


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)]


def _timed(fn, mix: list[dict], before=None) -> list[float]:
    """Each call's CPU time in microseconds, one call per request (``before``, untimed, ahead of
    each)."""
    clock = time.thread_time
    out = []
    for request in mix:
        if before is not None:
            before()
        start = clock()
        fn(request)
        out.append((clock() - start) * 1e6)
    return out


def _series(
    predictor, pipeline, plan, mix: list[dict], new: list[dict], runs: int
) -> dict[str, list[tuple]]:
    """Per series, each run's (p50, p99)."""
    out: dict[str, list[tuple]] = {"warm": [], "cold": [], "evaluate": []}
    for _ in range(runs):
        out["warm"].append(_percentiles(_timed(lambda r: predictor.predict(r, plan), mix)))
        cold = _timed(lambda r: predictor.predict(r, plan), new, predictor.forget)
        out["cold"].append(_percentiles(cold))
        out["evaluate"].append(_percentiles(_timed(lambda r: pipeline.evaluate(**r), new)))
    return out


def bench(name: str, calls: int, runs: int, shapes: int) -> list[str]:
    cal, pipeline = calibrated_example(name)
    components = components_from_bytes(cal.component_weight_bytes, cal.layer_bytes)
    target = from_estimate(
        cal.estimate, components, phase_weights=cal.phase_weights, unobserved=cal.unobserved
    )
    plan = solve(components, [target], Device(sum(cal.component_weight_bytes.values()) * 4))
    start = time.thread_time()
    predictor = from_calibration(cal, pipeline)
    built_ms = (time.thread_time() - start) * 1e3
    admissible = [
        r
        for r in _requests(dict(cal.shapes.target), dict(cal.shapes.probe))
        if pipeline.is_admissible(**r)
    ]
    mix = [admissible[k % len(admissible)] for k in range(calls)]
    drawn = _new_shapes(pipeline, dict(cal.shapes.target), dict(cal.shapes.probe), shapes)
    new = [drawn[k % len(drawn)] for k in range(calls)]
    series = _series(predictor, pipeline, plan, mix, new, runs)
    row = [name, str(len(predictor.phases)), f"{len(admissible)} / {len(drawn)}"]
    row.append(f"{built_ms:.2f}")
    for key in ("warm", "cold", "evaluate"):
        p50s, p99s = zip(*series[key])
        row += [
            f"{statistics.median(p50s):.1f}",
            f"{min(p99s):.1f}",
            f"{statistics.median(p99s):.1f}",
        ]
    worst = max(statistics.median(p99 for _, p99 in series[k]) for k in ("warm", "cold"))
    return [*row, "yes" if worst <= GOAL_US else "NO"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--shapes", type=int, default=2000, help="distinct cold requests at most")
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()} {platform.processor() or ''} python "
        f"{platform.python_version()}; CPU time per call, {args.calls} calls x {args.runs} runs; "
        f"load average {os.getloadavg()[0]:.1f}, nice {os.nice(0)}"
    )
    head = ["example", "phases", "requests warm / cold", "build ms"]
    for key in ("warm", "cold", "evaluate"):
        head += [f"{key} p50 us", f"{key} p99 best", f"{key} p99 median"]
    head.append("p99 <= 50 us (medians)")
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for name in args.examples.split(","):
        row = bench(name, args.calls, args.runs, args.shapes)
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
