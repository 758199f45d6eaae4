"""How a tiny pipeline's stage peaks and times scale with the request's shape (the facts behind a
formula).

    .venv/bin/python bench/shapes.py [--example wan] [--stage DecodingStage] [--sizes 32,64]
                                     [--frames 1,5,9,13,17,21,33] [--repeat 3]

For each (size, frames): the stage's peak above the request's baseline, per pixel of one frame,
and its time (fastest of ``--repeat`` runs, this thread's CPU time), per pixel. A memory term is
right when the per-pixel peak is affine in what the term says (latent frames for the Wan VAE);
a time measure when the per-pixel time is flat.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration.calibrate.run import full_point, load_pipeline
from calibration.core.host import quiet_libraries, torch_threads
from calibration.core.session import Session
from calibration.examples import EXAMPLES

FORMULAS = Path(__file__).resolve().parent.parent / "formulas"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--example", default="wan", choices=sorted(EXAMPLES))
    parser.add_argument("--stage", default="DecodingStage")
    parser.add_argument("--sizes", type=_ints, default=[32, 64], help="square sizes in pixels")
    parser.add_argument("--frames", type=_ints, default=[1, 5, 9, 13, 17, 21, 33])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    example = EXAMPLES[args.example]
    pipeline = load_pipeline(FORMULAS / example.formula_file, example.pipeline)
    has_frames = "frames" in pipeline.default_workload
    frames = args.frames if has_frames else [1]
    print("| size | frames | memory terms | peak above baseline B | B / px | ms | us / px |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    with quiet_libraries(), torch_threads("cpu", 1):
        session = Session(example.build(0), pipeline, "cpu", call_kwargs=example.call_kwargs)
        session.run(full_point(pipeline, {**example.warmup, "steps": 1}, "warmup"))
        for size in args.sizes:
            for count in frames:
                shape = {"steps": 1, "height": size, "width": size}
                if has_frames:
                    shape["frames"] = count
                point = full_point(pipeline, {**example.target, **shape}, "point")
                runs = [session.run(point) for _ in range(args.repeat)]
                fastest = min(runs, key=lambda r: r.stage_durations.get(args.stage, float("inf")))
                peak = max(
                    (
                        p.peak_allocated
                        for p in fastest.phases
                        if p.kind == "stage" and p.name == args.stage
                    ),
                    default=None,
                )
                if peak is None:
                    print(f"| {size} | {count} | - | stage {args.stage} did not run | | | |")
                    continue
                above = peak - fastest.baseline_allocated
                seconds = fastest.stage_durations[args.stage]
                terms = ", ".join(str(t) for t in pipeline.memory_terms(args.stage, **point))
                pixels = size * size
                print(
                    f"| {size} | {count} | [{terms}] | {above:,} | {above / pixels:,.0f} | "
                    f"{seconds * 1e3:.1f} | {seconds / pixels * 1e6:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
