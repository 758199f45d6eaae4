"""One request prediction's cost (``calibration.serve.predictor``) on every example, beside the
formulas' own evaluation (the part no predictor can skip).

    .venv/bin/python bench/predict.py [--examples flux,wan] [--calls 20000]

Each example is calibrated once at its default shapes (one round, no time probe), its predictor
built; then ``--calls`` predictions at requests drawn from a fixed mix (the target, the probe,
and points between and beyond them along the probe axes), each timed alone in this thread's CPU
time (the machine is shared: wall time would time the neighbours). Goal: p99 <= 50 us.
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

from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.run import load_pipeline
from calibration.examples import EXAMPLES
from calibration.plan.inputs import components_from_bytes, from_estimate
from calibration.plan.model import Device
from calibration.plan.solver import solve
from calibration.serve.predictor import from_calibration

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


def _timed(fn, calls: int) -> list[float]:
    clock = time.thread_time
    out = []
    for _ in range(calls):
        start = clock()
        fn()
        out.append((clock() - start) * 1e6)
    return out


def bench(name: str, calls: int) -> list[str]:
    example = EXAMPLES[name]
    pipeline = load_pipeline(ROOT / "formulas" / example.formula_file, example.pipeline)
    cal = calibrate_pipeline(
        example.build,
        pipeline,
        example.shapes,
        call_kwargs=example.call_kwargs,
        repeat=1,
        time_tolerance=None,
    )
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
    it = iter(mix)
    predicted = _timed(lambda: predictor.predict(next(it), plan), calls)
    it = iter(mix)
    evaluated = _timed(lambda: pipeline.evaluate(**next(it)), calls)
    p50, p99 = _percentiles(predicted)
    e50, e99 = _percentiles(evaluated)
    return [
        name,
        str(len(predictor.phases)),
        f"{built_ms:.2f}",
        f"{p50:.1f}",
        f"{p99:.1f}",
        f"{e50:.1f}",
        f"{e99:.1f}",
        f"{statistics.median(predicted) / max(e50, 1e-9):.1f}",
        "yes" if p99 <= GOAL_US else "NO",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()} {platform.processor() or ''} python "
        f"{platform.python_version()}; CPU time per call, {args.calls} calls"
    )
    head = [
        "example",
        "phases",
        "build ms",
        "p50 us",
        "p99 us",
        "evaluate p50 us",
        "evaluate p99 us",
        "predict / evaluate",
        "p99 <= 50 us",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for name in args.examples.split(","):
        print("| " + " | ".join(bench(name, args.calls)) + " |", flush=True)


if __name__ == "__main__":
    main()
