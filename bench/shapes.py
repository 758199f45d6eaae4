"""How a tiny pipeline's stage peaks and times scale with the request's shape (the facts behind a
formula).

    .venv/bin/python bench/shapes.py [--example wan] [--stage DecodingStage] [--sizes 32,64]
                                     [--frames 1,5,9,13,17,21,33] [--repeat 3]
                                     [--steps 1,2,3] [--cfg false,true]
    .venv/bin/python bench/shapes.py --pipeline FILE.py:build --formulas FILE.wf --name NAME ...

For each (size, frames, steps, and cfg where ``--cfg`` lists values): the stage's peak above the
request's baseline, per pixel of one frame, and its time (fastest of ``--repeat`` runs, this
thread's CPU time), per pixel. A memory term is right when the per-pixel peak is affine in what
the term says (latent frames for the Wan VAE); a time measure when the per-pixel time is flat.
``--steps 2`` or more shows what a denoising loop keeps from one step to the next; ``--steps
1,2,3`` measures each count in turn (a scheduler keeping more from the second or third step on).
``--pipeline`` takes a factory as ``dslc calibrate --pipeline`` does (its module's ``call_kwargs``,
``WARMUP`` and ``TARGET`` when it has them), with the formulas' pipeline ``--name`` in
``--formulas``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration.calibrate.run import full_point, load_pipeline
from calibration.core.factory import load_factory
from calibration.core.host import quiet_libraries, torch_threads
from calibration.core.session import Session
from calibration.examples import EXAMPLES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from artifact.point import Point
    from runtime import Pipeline

FORMULAS = Path(__file__).resolve().parent.parent / "formulas"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _bools(text: str) -> list[bool]:
    values = {"true": True, "false": False}
    try:
        return [values[x.strip().lower()] for x in text.split(",") if x.strip()]
    except KeyError as exc:
        raise argparse.ArgumentTypeError(f"{exc.args[0]!r}: give true or false") from None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--example", default="wan", choices=sorted(EXAMPLES))
    parser.add_argument("--stage", default="DecodingStage")
    parser.add_argument("--sizes", type=_ints, default=[32, 64], help="square sizes in pixels")
    parser.add_argument("--frames", type=_ints, default=[1, 5, 9, 13, 17, 21, 33])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=_ints, default=[1], help="e.g. 1,2,3")
    parser.add_argument("--cfg", type=_bools, default=[], help="e.g. false,true (default: as set)")
    parser.add_argument("--pipeline", help="FILE.py:FACTORY, instead of --example")
    parser.add_argument("--formulas", type=Path, help="with --pipeline: a .wf file or folder")
    parser.add_argument("--name", help="with --pipeline: the pipeline in --formulas")
    args = parser.parse_args(argv)
    if args.pipeline and not (args.formulas and args.name):
        parser.error("--pipeline needs --formulas and --name")
    source = _factory(args) if args.pipeline else _example(args.example)
    _table(source, args)


#: What a table measures: the formulas, the factory, its call arguments, warmup and target.
Source = tuple[
    "Pipeline",
    "Callable[[int], object]",
    "Callable[[int], Mapping[str, object]] | None",
    "Point",
    "Point",
]


def _example(name: str) -> Source:
    example = EXAMPLES[name]
    pipeline = load_pipeline(FORMULAS / example.formula_file, example.pipeline)
    return pipeline, example.build, example.call_kwargs, example.warmup, example.target


def _factory(args: argparse.Namespace) -> Source:
    factory = load_factory(args.pipeline)
    pipeline = load_pipeline(args.formulas, args.name)
    warmup, target = factory.warmup or {}, factory.target or {}
    return pipeline, factory.build, factory.call_kwargs, warmup, target


def _table(source: Source, args: argparse.Namespace) -> None:
    """One row a (size, frames, steps, cfg): the stage's peak above baseline and time."""
    pipeline, build, call_kwargs, warmup, target = source
    points = [
        full_point(pipeline, {**target, **shape}, "point") for shape in _shapes(pipeline, args)
    ]
    print(
        "| size | frames | steps | cfg | memory terms | peak above baseline B | B / px | ms "
        "| us / px |"
    )
    print("| ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |")
    with quiet_libraries(), torch_threads("cpu", 1):
        pipe = build(0)  # any diffusers pipeline, as `dslc calibrate --pipeline` takes it
        session = Session(pipe, pipeline, "cpu", call_kwargs=call_kwargs)  # type: ignore[arg-type]
        # no WARMUP in a factory's module: the first size (never the default workload's)
        session.run(full_point(pipeline, {**(warmup or points[0]), "steps": 1}, "warmup"))
        for point in points:
            print(_row(session, pipeline, point, args.stage, args.repeat), flush=True)


def _shapes(pipeline: Pipeline, args: argparse.Namespace) -> list[dict[str, int | bool]]:
    """Every (size, frames, steps, cfg) asked for, in that nesting order."""
    has_frames = "frames" in pipeline.default_workload
    shapes: list[dict[str, int | bool]] = []
    for size in args.sizes:
        for count in args.frames if has_frames else [1]:
            for steps in args.steps:
                for cfg in args.cfg or [None]:
                    shape: dict[str, int | bool] = {"steps": steps, "height": size, "width": size}
                    if has_frames:
                        shape["frames"] = count
                    if cfg is not None:
                        shape["cfg"] = cfg
                    shapes.append(shape)
    return shapes


def _row(session: Session, pipeline: Pipeline, point: Point, stage: str, repeat: int) -> str:
    """One size's table row: the stage's peak above baseline and time, fastest of ``repeat``."""
    runs = [session.run(point) for _ in range(repeat)]
    fastest = min(runs, key=lambda r: r.stage_durations.get(stage, float("inf")))
    peak = max(
        (p.peak_allocated for p in fastest.phases if p.kind == "stage" and p.name == stage),
        default=None,
    )
    size, cfg, steps = point["height"], point.get("cfg", "-"), point["steps"]
    count = point.get("frames", 1)
    if peak is None:
        return f"| {size} | {count} | {steps} | {cfg} | - | stage {stage} did not run | | | |"
    above = peak - fastest.baseline_allocated
    seconds = fastest.stage_durations[stage]
    terms = ", ".join(str(t) for t in pipeline.memory_terms(stage, **point))
    pixels = int(point["height"]) * int(point["width"])
    return (
        f"| {size} | {count} | {steps} | {cfg} | [{terms}] | {above:,} | {above / pixels:,.0f} | "
        f"{seconds * 1e3:.1f} | {seconds / pixels * 1e6:.1f} |"
    )


if __name__ == "__main__":
    main()
