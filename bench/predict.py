"""One request prediction's cost (``calibration.serve.predictor``) on every example, beside the
formulas' own checked evaluation (``Pipeline.evaluate``: what the loader serves, for scale).

    .venv/bin/python bench/predict.py [--examples flux,wan] [--calls 20000] [--runs 5]

Each example is calibrated once at its default shapes (one round, no time probe), its predictor
built; then ``--calls`` predictions at requests drawn from a fixed mix (the target, the probe,
and points between and beyond them along the probe axes), each timed alone in this thread's CPU
time (the machine is shared: wall time would time the neighbours). ``warm``: the predictor keeps
each request's figures, as a worker serving repeated shapes does; ``cold``: it forgets them
before every call (outside the timing), so each prediction evaluates the formulas and every phase
model afresh. All three series are timed ``--runs`` times, interleaved; the table gives the median
p50, and the best and the median p99 over the runs. Goal: p99 <= 50 us.
"""

from __future__ import annotations

import argparse
import platform
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


def _series(predictor, pipeline, plan, mix: list[dict], runs: int) -> dict[str, list[tuple]]:
    """Per series, each run's (p50, p99)."""
    out: dict[str, list[tuple]] = {"warm": [], "cold": [], "evaluate": []}
    for _ in range(runs):
        out["warm"].append(_percentiles(_timed(lambda r: predictor.predict(r, plan), mix)))
        cold = _timed(lambda r: predictor.predict(r, plan), mix, predictor.forget)
        out["cold"].append(_percentiles(cold))
        out["evaluate"].append(_percentiles(_timed(lambda r: pipeline.evaluate(**r), mix)))
    return out


def bench(name: str, calls: int, runs: int) -> list[str]:
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
    series = _series(predictor, pipeline, plan, mix, runs)
    row = [name, str(len(predictor.phases)), str(len(admissible)), f"{built_ms:.2f}"]
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
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()} {platform.processor() or ''} python "
        f"{platform.python_version()}; CPU time per call, {args.calls} calls x {args.runs} runs"
    )
    head = ["example", "phases", "requests", "build ms"]
    for key in ("warm", "cold", "evaluate"):
        head += [f"{key} p50 us", f"{key} p99 best", f"{key} p99 median"]
    head.append("p99 <= 50 us (medians)")
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for name in args.examples.split(","):
        print("| " + " | ".join(bench(name, args.calls, args.runs)) + " |", flush=True)


if __name__ == "__main__":
    main()
