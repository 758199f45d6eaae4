"""How the new example families' stage peaks and times scale: the measurements behind their
formulas.

    .venv/bin/python bench/families.py [--family sdxl,cogvideox,pixart_sigma,custom_sd] [--repeat 2]

Each family is a tiny random-weight diffusers pipeline (calibration/examples/, and the test-only
SD 1.5 pipeline of tests/calibration/custom_pipeline.py) recorded with ``runtime.measure`` at a grid
of shapes, wired by its formula file's pipeline facts (stage ``uses``, ``per step``, ``call``).
Per stage and shape: the stage's declared memory terms, its peak above the request's baseline, the
least-squares fit ``peak = constant + slope_1 * term_1 + ...`` over the grid's steady points and
what the fit leaves over (a formula explains the peaks when the residuals are a small fraction of
the peak), and the time of one iteration per unit of the declared time measure (fastest of
``--repeat`` runs, this thread's CPU time: flat when the measure is right).
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration.calibrate.run import load_pipeline
from calibration.core.host import quiet_libraries, torch_threads
from runtime import Pipeline
from runtime.measure import AutoStages
from runtime.measure.diffusers_hooks import diffusers_recorder, run_pipeline
from runtime.record import WarmupRecord

Point = dict[str, int | bool]


def _image_grid(sizes: Sequence[int], steps: int = 2) -> list[Point]:
    return [{"steps": steps, "height": s, "width": s} for s in sizes] + [
        {"steps": 2, "height": sizes[1], "width": sizes[1]},
        {"steps": 6, "height": sizes[1], "width": sizes[1]},
        {"steps": steps, "height": sizes[0], "width": sizes[-1]},
    ]


def _video_grid(sizes: Sequence[int], frames: Sequence[int]) -> list[Point]:
    grid = [{"steps": 2, "frames": f, "height": s, "width": s} for s in sizes for f in frames]
    return [*grid, {"steps": 4, "frames": frames[1], "height": sizes[0], "width": sizes[0]}]


#: family -> (factory module, formula file, pipeline, grid of shapes).
FAMILIES: Mapping[str, tuple[str, str, str, list[Point]]] = {
    "sdxl": (
        "calibration.examples.sdxl",
        "formulas/sdxl.wf",
        "sdxl_base",
        _image_grid([64, 128, 192, 256]),
    ),
    "pixart_sigma": (
        "calibration.examples.pixart_sigma",
        "formulas/pixart_sigma.wf",
        "pixart_sigma_1024",
        _image_grid([64, 128, 192, 256], steps=3),
    ),
    "cogvideox": (
        "calibration.examples.cogvideox",
        "formulas/cogvideox.wf",
        "cogvideox_2b",
        _video_grid([32, 48], [1, 9, 17, 25, 33]),
    ),
    "custom_sd": (
        "tests.calibration.custom_pipeline",
        "tests/calibration/data/custom_sd.wf",
        "custom_sd",
        [
            *({"steps": n, "height": 64, "width": 64} for n in (1, 2, 3, 4, 5, 8)),
            *({"steps": 2, "height": s, "width": s} for s in (96, 128, 192)),
            {"steps": 8, "height": 128, "width": 128},
        ],
    ),
}


def _stages(formulas: Any) -> tuple[AutoStages, dict[str, list[str]]]:
    """The formula file's facts as the recorder takes them: stage per component(.method)."""
    stage_for: dict[str, str] = {}
    entry_points: dict[str, list[str]] = {}
    for stage, uses in formulas.uses.items():
        for use in uses:
            if use.method == "forward":
                stage_for[use.component] = stage
            else:
                stage_for[f"{use.component}.{use.method}"] = stage
                entry_points.setdefault(use.component, []).append(use.method)
    return AutoStages(stage_for, frozenset(formulas.stepped_stages)), entry_points


def _call(formulas: Any, module: Any, params: Point) -> dict[str, object]:
    """The factory's constant arguments, then the formula file's `call` arguments at ``params``."""
    declared = formulas.call_arguments(**params)
    numbers = {k: float(v) if isinstance(v, Fraction) else v for k, v in declared.items()}
    return {**module.call_kwargs(0), **numbers}


def _stage_peak(record: WarmupRecord, stage: str) -> int | None:
    peaks = [p.peak_allocated for p in record.phases if p.kind == "stage" and p.name == stage]
    return max(peaks) - record.baseline_allocated if peaks else None


def _outside(record: WarmupRecord) -> list[str]:
    return sorted({p.name for p in record.phases if p.kind == "component" and p.stage is None})


def _counted(record: WarmupRecord, stage: str) -> int:
    return {s.stage: s.measured for s in record.stage_iterations}[stage]


def per_iteration(record: WarmupRecord, stage: str) -> float:
    """Seconds of one iteration of ``stage`` (its duration over its iteration count)."""
    return record.stage_durations.get(stage, 0.0) / max(_counted(record, stage), 1)


def _fit(rows: list[tuple[tuple[float, ...], float]]) -> tuple[list[float], list[float]]:
    """Least squares ``peak = c + sum(slope_i * term_i)``; the coefficients and each row's
    residual.
    """
    a = np.array([[1.0, *terms] for terms, _ in rows])
    b = np.array([float(peak) for _, peak in rows])
    coefficients, *_ = np.linalg.lstsq(a, b, rcond=None)
    return list(coefficients), list(b - a @ coefficients)


#: The smallest shapes each formula holds at (docs/formulas.md, "Steady regimes").
STEADY = {"cogvideox": ("frames", 17), "pixart_sigma": ("steps", 3), "custom_sd": ("steps", 2)}


def _steady(family: str, point: Point) -> bool:
    param, least = STEADY.get(family, ("steps", 1))
    return int(point[param]) >= least


def measure(family: str, repeat: int) -> None:
    module_name, formula_file, name, grid = FAMILIES[family]
    module = importlib.import_module(module_name)
    formulas = load_pipeline(ROOT / formula_file, name)
    records = _records(module, formulas, grid, repeat)
    print(f"\n### {family}: `{name}` ({formula_file})\n")
    outside = sorted({c for _, r in records for c in _outside(r)})
    print(f"components run outside every stage: {', '.join(outside) or 'none'}\n")
    print(
        "| stage | point | memory terms | peak above baseline B | fit residual | iterations | "
        "ms / iteration | us / iteration / time unit |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for stage in formulas.stages:
        _print_stage(family, formulas, records, stage)


def _records(
    module: Any, formulas: Pipeline, grid: Sequence[Point], repeat: int
) -> list[tuple[Point, WarmupRecord]]:
    """Each point of the grid run `repeat` times after one warm-up run: its fastest record."""
    pipe = module.build(0)
    stages, entry_points = _stages(formulas)
    recorder = diffusers_recorder(
        formulas,
        pipe,
        "cpu",
        stages=stages,
        entry_points=entry_points,
        layerwise=(),
        clock=time.thread_time,
    )
    scheduler = pipe.scheduler
    records: list[tuple[Point, WarmupRecord]] = []
    with recorder.request(**grid[0]) as req:  # warm up: first calls initialise lazily
        run_pipeline(pipe, req, **_call(formulas, module, req.params))
    for point in grid:
        runs = []
        for _ in range(repeat):
            pipe.scheduler = type(scheduler).from_config(scheduler.config)  # no state carried over
            with recorder.request(**point) as req:
                run_pipeline(pipe, req, **_call(formulas, module, req.params))
            runs.append(recorder.records[-1])
        records.append((point, min(runs, key=lambda r: r.duration_s)))
    return records


def _print_stage(
    family: str, formulas: Pipeline, records: Sequence[tuple[Point, WarmupRecord]], stage: str
) -> None:
    """One stage's rows (a point each) and its fits over the steady points."""
    rows = []
    for point, record in records:
        peak = _stage_peak(record, stage)
        if peak is None:
            continue
        terms = tuple(float(t) for t in formulas.memory_terms(stage, **point))
        rows.append((point, record, terms, peak))
    steady = [(terms, peak) for point, _, terms, peak in rows if _steady(family, point)]
    coefficients, _ = _fit(steady)
    for point, record, terms, peak in rows:
        predicted = coefficients[0] + sum(c * t for c, t in zip(coefficients[1:], terms))
        residual = (peak - predicted) / peak if peak else 0.0
        counted = _counted(record, stage)
        seconds = per_iteration(record, stage)
        unit = float(formulas.time(stage, **point))
        shape = " ".join(f"{k}={v}" for k, v in point.items() if k != "cfg")
        mark = "" if _steady(family, point) else " (not steady)"
        print(
            f"| {stage} | {shape}{mark} | {', '.join(f'{t:g}' for t in terms)} | {peak:,} | "
            f"{residual:+.1%} | {counted} | {seconds * 1e3:.2f} | "
            f"{seconds / unit * 1e6:.3f} |"
        )
    if any(len({terms[i] for terms, _ in steady}) > 1 for i in range(len(steady[0][0]))):
        fit = " + ".join(f"{c:,.1f} x term{i}" for i, c in enumerate(coefficients[1:], 1))
        fit = f"B = {coefficients[0]:,.0f} + {fit}"
    else:
        fit = f"B = {max(peak for _, peak in steady):,} (constant terms)"
    times = [
        (per_iteration(r, stage), float(formulas.time(stage, **p)))
        for p, r in records
        if _steady(family, p) and stage in r.stage_durations
    ]
    t_fit, t_residuals = _fit([((unit,), t) for t, unit in times])
    worst = max(abs(r) / t for r, (t, _) in zip(t_residuals, times))
    print(
        f"| {stage} | fit over steady points | {fit} | | | | "
        f"{t_fit[0] * 1e3:.2f} + {t_fit[1] * 1e6:.4f} us x unit | worst {worst:.0%} |"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default=",".join(FAMILIES), help="comma-separated families")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    print(
        f"machine: {platform.machine()}, {torch.get_num_threads()} torch threads -> 1, "
        f"torch {torch.__version__}, CPython {platform.python_version()}"
    )
    with quiet_libraries(), torch_threads("cpu", 1), torch.no_grad():
        for family in args.family.split(","):
            measure(family.strip(), args.repeat)


if __name__ == "__main__":
    main()
