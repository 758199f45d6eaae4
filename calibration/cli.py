"""`dslc calibrate`: warm up a diffusers pipeline, estimate a target, optionally verify it.

A plugin command of `dslc` (entry point ``dslc.commands``). Everything heavy (torch, diffusers) is
imported only when the command runs. The loop lives in ``calibration.run``, the document and tables
in ``calibration.report``, what a terminal shows in ``calibration.cli_show``, the figure in
``calibration.plot``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from calibration.examples import EXAMPLES
from calibration.time_probe import TIME_TOLERANCE
from dslc.cli_support import Failure, assignments, ui
from runtime.estimate.results import DEFAULT_MARGIN
from runtime.params import point_text

Params = Mapping[str, int | bool]

#: The repository's formulas/ folder (beside the calibration package in a checkout).
FORMULAS = Path(__file__).resolve().parent.parent / "formulas"


def shape_option(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> dict[str, int | bool]:
    """`NAME=VALUE[,NAME=VALUE...]`, the option repeatable; values as in `dslc eval --set`."""
    items = [part.strip() for raw in values for part in raw.split(",") if part.strip()]
    return assignments(ctx, param, items)


def _shape(params: object) -> str:
    items = dict(params).items()  # type: ignore[call-overload]
    return point_text(dict(items))


EPILOG = "\n".join(
    [
        "\b",
        "Examples:",
        "  dslc calibrate                    # tiny Wan on the CPU: warmup, probe, estimate",
        "  dslc calibrate --verify           # ... and run the target to compare",
        "  dslc calibrate --verify --json > calibration.json",
        "  dslc calibrate --example flux --verify --plot flux.png",
        "  dslc calibrate --probe steps=2,height=32,width=32 \\",
        "      --target steps=8,frames=17,height=64,width=64",
        "  dslc calibrate --pipeline my_pipes.py:build --formulas formulas/ --name my_model \\",
        "      --probe steps=2,height=64,width=64 --target steps=8,height=128,width=128 --verify",
        "",
        "\b",
        "Default shapes (the formulas' default workloads are far too big for a CPU demo):",
        *(
            line
            for e in EXAMPLES.values()
            for line in (
                f"  {e.name:6} warmup {_shape(e.warmup)}",
                f"         probe  {_shape(e.probe)}",
                f"         target {_shape(e.target)}",
            )
        ),
    ]
)


@click.command(
    "calibrate",
    epilog=EPILOG,
    short_help="Calibrate a diffusers pipeline from a warmup probe.",
)
@click.option(
    "--example",
    type=click.Choice(sorted(EXAMPLES)),
    default="wan",
    show_default=True,
    help="Which built-in example pipeline to build (random weights, nothing downloaded).",
)
@click.option(
    "--pipeline",
    "factory",
    metavar="MODULE:FACTORY",
    help="Your own pipeline instead of an example: a callable (seed) -> diffusers pipeline, as "
    "module:function or path/to/file.py:function.",
)
@click.option(
    "--formulas",
    "formulas_path",
    type=click.Path(path_type=Path),
    default=FORMULAS,
    show_default="the repository's formulas/",
    help="A .wf file or a folder of them (compiled in memory).",
)
@click.option(
    "--name",
    metavar="PIPELINE",
    help="The pipeline in the formulas (default: the example's; required with --pipeline).",
)
@click.option(
    "--warmup",
    multiple=True,
    callback=shape_option,
    metavar="NAME=VALUE[,...]",
    help="The bounded warmup (run before and after the probe); unset params: the probe's.",
)
@click.option(
    "--probe",
    multiple=True,
    callback=shape_option,
    metavar="NAME=VALUE[,...]",
    help="The probe; unset params: the target's.",
)
@click.option(
    "--target",
    multiple=True,
    callback=shape_option,
    metavar="NAME=VALUE[,...]",
    help="The target to estimate; unset params: the example's demo target, then the default "
    "workload.",
)
@click.option(
    "--margin",
    type=click.FloatRange(min=1.0),
    default=DEFAULT_MARGIN,
    show_default=True,
    help="Padding of what is extrapolated (the bound); the prediction itself uses 1.0.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="auto: CUDA when available, else the CPU (exact live-tensor accounting).",
)
@click.option("--verify", is_flag=True, help="Also run the target for real and compare.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the document of docs/estimators.md on stdout."
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE.png",
    help="Draw per-iteration peaks and predicted vs measured (matplotlib).",
)
@click.option(
    "--save",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE.json",
    help="Also write the --json document to FILE (`dslc plan --calibration FILE` reads it).",
)
@click.option(
    "--records",
    "records_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE.json",
    help="Also save the warmup records (and the target's, with --verify).",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Run the probe and the re-warm (and, with --verify, the target) this many times; "
    "timings count by their median.",
)
@click.option(
    "--clock",
    type=click.Choice(["auto", "cpu", "wall"]),
    default="auto",
    show_default=True,
    help="cpu: the thread's CPU time (other processes do not count); auto: cpu on the CPU, else "
    "wall.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the random weights and latents."
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="CPU threads for torch (1 keeps timings steady on a shared machine).",
)
@click.option(
    "--time-tolerance",
    type=click.FloatRange(min=0, min_open=True),
    default=TIME_TOLERANCE,
    show_default=True,
    help="Probe a larger size when two sigma of a stage's predicted time exceeds this share of "
    "the request's.",
)
@click.option(
    "--no-time-probe",
    is_flag=True,
    help="Never probe a larger size for time alone (the runs then depend only on the formulas).",
)
def calibrate(
    example: str,
    factory: str | None,
    formulas_path: Path,
    name: str | None,
    warmup: dict[str, int | bool],
    probe: dict[str, int | bool],
    target: dict[str, int | bool],
    margin: float,
    device: str,
    verify: bool,
    as_json: bool,
    plot: Path | None,
    save: Path | None,
    records_path: Path | None,
    repeat: int,
    clock: str,
    seed: int,
    threads: int,
    time_tolerance: float,
    no_time_probe: bool,
) -> None:
    """Calibrate a diffusers pipeline on a cheap probe and estimate a target.

    Compiles the formulas (in memory), builds the pipeline (a built-in example from tiny
    configs with random weights, or yours with --pipeline), wires it to a recorder from
    the formulas' facts (`uses`, `per step`, `call`), and records a bounded warmup, the
    probe, the extra probes that pin down every declared term at the target, and a
    bounded re-warm. It checks the measured sizes against the formulas (warnings:
    formula-mismatch, probe-regime) and estimates, at the target, every phase's peak
    memory (the prediction, and the bound with the margin), the request's peak and
    time, and the layer uses. With --verify it runs the target too and compares.
    """
    from calibration.cli_show import progress_bar, save_records, show, warn
    from calibration.errors import CalibrationError
    from calibration.factory import load_factory
    from calibration.run import calibrate_pipeline, load_pipeline

    try:
        if factory is not None:
            if name is None:
                raise CalibrationError("--pipeline needs --name: the pipeline in the formulas")
            loaded = load_factory(factory)
            pipeline = load_pipeline(formulas_path, name)
            build, call_kwargs, label = loaded.build, loaded.call_kwargs, factory
            defaults = _defaults(loaded.shapes, probe, target)
        else:
            chosen = EXAMPLES[example]
            path = formulas_path / chosen.formula_file if formulas_path.is_dir() else formulas_path
            pipeline = load_pipeline(path, name or chosen.pipeline)
            build, call_kwargs, label = chosen.build, chosen.call_kwargs, chosen.name
            defaults = chosen.shapes
            formulas_path = path
        with progress_bar(enabled=sys.stderr.isatty()) as tick:
            cal = calibrate_pipeline(
                build,
                pipeline,
                defaults,
                warmup=warmup,
                probe=probe,
                target=target,
                call_kwargs=call_kwargs,
                margin=margin,
                verify=verify,
                device=device,
                seed=seed,
                threads=threads,
                repeat=repeat,
                clock=clock,
                progress=tick,
                label=label,
                formula_path=str(formulas_path),
                time_tolerance=None if no_time_probe else time_tolerance,
            )
    except CalibrationError as exc:
        raise Failure(str(exc)) from None
    if records_path is not None:
        save_records(records_path, cal)
    if plot is not None:
        from calibration.plot import plot as draw

        try:
            draw(cal, plot)
        except OSError as exc:
            raise Failure(f"cannot write {plot}: {exc.strerror or exc}") from None
    if as_json or save is not None:
        from calibration.report import document

        doc = document(cal)
        if save is not None:
            from runtime.atomic import write_atomically

            try:
                write_atomically(save, json.dumps(doc, indent=2) + "\n")
            except OSError as exc:
                raise Failure(f"cannot write {save}: {exc.strerror or exc}") from None
    if as_json:
        ui().out.json(doc)
    else:
        show(cal, plot)
    warn(cal)


def _defaults(
    shapes: tuple[object, object, object],
    probe: dict[str, int | bool],
    target: dict[str, int | bool],
) -> tuple[Params, Params, Params]:
    """--pipeline's demo shapes: its module's WARMUP/PROBE/TARGET, else --probe and --target."""
    from calibration.errors import CalibrationError

    warmup_d, probe_d, target_d = (dict(s) if isinstance(s, dict) else None for s in shapes)
    if target_d is None and not target:
        raise CalibrationError(
            "--pipeline: give --target (the formulas' default workload is rarely a CPU-sized run), "
            "or define TARGET in the factory's module"
        )
    if probe_d is None and not probe:
        raise CalibrationError("--pipeline: give --probe, or define PROBE in the factory's module")
    probe_full = probe_d or {}
    return (warmup_d or probe_full, probe_full, target_d or {})
