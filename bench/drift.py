"""How a stage's time per pixel changes with size, and how the machine's speed drifts meanwhile.

    .venv/bin/python bench/drift.py [--example wan] [--stage DecodingStage]
                                    [--sizes 32,48,64,80,96,112,128] [--frames 17] [--rounds 4]

Every size is run once a round (steps 2), ``--rounds`` rounds, interleaved as the calibration loop
interleaves its sizes. Printed: each round's time of the stage per size (its last iteration for a
repeated stage, else the whole stage), the median per size and per pixel, and each round's speed:
the median over sizes of (round's time / size's median). The first shows how far a plane through
small sizes is from a large one (``runtime.estimate.time_fit.MODEL_ERROR``); the second why the
loop measures the target in the same rounds as the probes. Times are this thread's CPU time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration.calibrate.run import full_point, load_pipeline
from calibration.core.host import quiet_libraries, torch_threads
from calibration.core.session import Session
from calibration.examples import EXAMPLES
from runtime.record import WarmupRecord

FORMULAS = Path(__file__).resolve().parent.parent / "formulas"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def stage_seconds(record: WarmupRecord, stage: str) -> float:
    """A repeated stage's last iteration (steady), else the whole stage."""
    steps = [i.duration_s for i in record.iterations if i.stage == stage]
    return steps[-1] if steps else record.stage_durations[stage]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--example", default="wan", choices=sorted(EXAMPLES))
    parser.add_argument("--stage", default="DecodingStage")
    parser.add_argument("--sizes", type=_ints, default=[32, 48, 64, 80, 96, 112, 128])
    parser.add_argument("--frames", type=int, default=17, help="for pipelines with frames")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    example = EXAMPLES[args.example]
    pipeline = load_pipeline(FORMULAS / example.formula_file, example.pipeline)
    points = {}
    for size in args.sizes:
        shape: dict[str, int | bool] = {"steps": 2, "height": size, "width": size}
        if "frames" in pipeline.default_workload:
            shape["frames"] = args.frames
        points[size] = full_point(pipeline, {**example.target, **shape}, f"size {size}")
    times: dict[int, list[float]] = {size: [] for size in args.sizes}
    with quiet_libraries(), torch_threads("cpu", 1):
        session = Session(example.build(0), pipeline, "cpu", call_kwargs=example.call_kwargs)
        session.run(points[args.sizes[0]])  # one-time costs
        for _ in range(args.rounds):
            for size in args.sizes:
                record = session.run(points[size])
                if not record.ok or args.stage not in record.stage_durations:
                    raise SystemExit(f"size {size}: {args.stage} did not run ({record.error})")
                times[size].append(stage_seconds(record, args.stage))
    medians = {size: statistics.median(v) for size, v in times.items()}
    rounds = " | ".join(f"round {k + 1} ms" for k in range(args.rounds))
    print(f"| size | {rounds} | median ms | ns / px |")
    print("| ---: |" + " ---: |" * (args.rounds + 2))
    for size in args.sizes:
        cells = " | ".join(f"{t * 1e3:.1f}" for t in times[size])
        per_pixel = medians[size] / (size * size) * 1e9
        print(f"| {size} | {cells} | {medians[size] * 1e3:.1f} | {per_pixel:,.0f} |")
    speed = [
        statistics.median(times[size][k] / medians[size] for size in args.sizes)
        for k in range(args.rounds)
    ]
    print(
        "\nround speed (time / the size's median, median over sizes): "
        + ", ".join(f"{s:.2f}" for s in speed)
    )


if __name__ == "__main__":
    main()
