"""`dslc calibrate`: warm up a real (tiny) diffusers pipeline, estimate a target, optionally verify
it.

Registered into the `dslc` group by ``register(cli)``. Everything heavy (torch, diffusers) is
imported only when the command runs. The session itself lives in ``calibration.run``, the
document and tables in ``calibration.report``, the figure in ``calibration.plot``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from calibration.examples import EXAMPLES
from dslc.cli_support import Failure, assignments, ui

#: The repository's formulas/ folder (next to the dslc package in a checkout or editable install).
FORMULAS = Path(__file__).resolve().parent.parent / "formulas"


def shape_option(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> dict[str, int | bool]:
    """`NAME=VALUE[,NAME=VALUE...]`, the option repeatable; values as in `dslc eval --set`."""
    items = [part.strip() for raw in values for part in raw.split(",") if part.strip()]
    return assignments(ctx, param, items)


def _shape(params: dict[str, int | bool]) -> str:
    return ",".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items()
    )


EPILOG = "\n".join(
    [
        "\b",
        "Examples:",
        "  dslc calibrate                # tiny Wan on the CPU: warmup, probe, estimate",
        "  dslc calibrate --verify       # ... and run the target to compare",
        "  dslc calibrate --verify --json > calibration.json",
        "  dslc calibrate --example flux --verify --plot flux.png",
        (
            "  dslc calibrate --probe steps=2,height=32,width=32"
            " --target steps=8,frames=17,height=64,width=64"
        ),
        "",
        "\b",
        "Default shapes (the formulas' default workloads are far too big for a CPU demo):",
        *(
            line
            for e in EXAMPLES.values()
            for line in (
                f"  {e.name:5} warmup {_shape(dict(e.warmup))}",
                f"        probe  {_shape(dict(e.probe))}",
                f"        target {_shape(dict(e.target))}",
            )
        ),
    ]
)


@click.command(
    "calibrate",
    epilog=EPILOG,
    short_help="Calibrate a tiny diffusers pipeline from a warmup probe.",
)
@click.option(
    "--example",
    type=click.Choice(sorted(EXAMPLES)),
    default="wan",
    show_default=True,
    help="Which example pipeline to build (random weights, nothing downloaded).",
)
@click.option(
    "--formulas",
    "formulas_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=FORMULAS,
    show_default="the repository's formulas/",
    help="Folder holding the example's .wf file.",
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
    default=1.2,
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
    "the fastest run counts.",
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
def calibrate(
    example: str,
    formulas_dir: Path,
    warmup: dict[str, int | bool],
    probe: dict[str, int | bool],
    target: dict[str, int | bool],
    margin: float,
    device: str,
    verify: bool,
    as_json: bool,
    plot: Path | None,
    records_path: Path | None,
    repeat: int,
    clock: str,
    seed: int,
    threads: int,
) -> None:
    """Calibrate an example diffusers pipeline on a cheap probe and estimate a target.

    Compiles the example's formula file from the formulas folder (in memory), builds
    a real diffusers pipeline from tiny configs with random weights, and records a
    bounded warmup, the probe and a bounded re-warm. From those records it estimates,
    at the target, every phase's peak memory (the prediction, and the bound with the
    margin), the request's peak and time, and the layer uses. With --verify it runs
    the target too and prints predicted vs measured and the error.
    """
    from calibration.run import calibrate_example
    from calibration.session import CalibrateError

    try:
        with _progress(enabled=sys.stderr.isatty()) as tick:
            cal = calibrate_example(
                EXAMPLES[example],
                formulas_dir,
                warmup=warmup,
                probe=probe,
                target=target,
                margin=margin,
                verify=verify,
                device=device,
                seed=seed,
                threads=threads,
                repeat=repeat,
                clock=clock,
                progress=tick,
            )
    except CalibrateError as exc:
        raise Failure(str(exc)) from None
    if records_path is not None:
        _save(records_path, cal)
    if plot is not None:
        from calibration.plot import plot as draw

        try:
            draw(cal, plot)
        except OSError as exc:
            raise Failure(f"cannot write {plot}: {exc.strerror or exc}") from None
    if as_json:
        from calibration.report import document

        ui().out.json(document(cal))
    else:
        _show(cal, plot)
    for line in cal.errors:
        ui().err.line(f"warning: a request failed: {line}", style="yellow")


def register(group: click.Group) -> None:
    """Add `calibrate` to the `dslc` group (call once, where the group is defined)."""
    group.add_command(calibrate)


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A rich progress bar on stderr (only on a terminal); yields the session's progress
    callback.
    """
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr, markup=False, emoji=False, highlight=False)
    with Progress(
        TextColumn("calibrate"),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("starting", total=1)

        def tick(step: int, total: int, what: str) -> None:
            bar.update(task, completed=step, total=total, description=what)

        yield tick


def _save(path: Path, cal: Any) -> None:
    from runtime.record import save_records

    records = [*cal.records, *([cal.measured] if cal.measured is not None else [])]
    try:
        save_records(path, records)
    except OSError as exc:
        raise Failure(f"cannot write {path}: {exc.strerror or exc}") from None


def _show(cal: Any, plot: Path | None) -> None:
    from calibration.report import memory_rows, show_bytes, time_rows

    out = ui().out
    out.line(
        f"{cal.pipeline}: example {cal.example} on {cal.device} ({cal.backend}), formulas "
        f"{cal.formula_path}",
        style="bold",
    )
    shown = [("warmup", cal.warmup), ("probe", cal.probe)]
    if cal.second_probe is not None:
        shown.append(("probe 2", cal.second_probe))
    for role, point in (*shown, ("target", cal.target)):
        out.line(
            f"{role + ':':8} "
            + ", ".join(
                f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in point.items()
            )
        )
    out.line(
        f"the target is {float(cal.work_ratio):.3g}x the probe (iterations x memory measure of the "
        f"repeated stage); margin {cal.estimate.margin:g}"
    )
    weights = sum(cal.component_weight_bytes.values())
    by_role: dict[str, list[Any]] = {}
    for role, record in zip(cal.roles, cal.records):
        by_role.setdefault(role, []).append(record)
    out.line(
        f"weights {show_bytes(weights)}; peaks: "
        + ", ".join(
            f"{role} {show_bytes(max(r.peak_allocated for r in records))}"
            + (f" ({len(records)} runs)" if len(records) > 1 else "")
            for role, records in by_role.items()
        )
    )
    out.line()
    out.table(
        ["memory", "method", "predicted", "bound", "measured", "error", "bound >= measured"],
        memory_rows(cal),
        right=[False, False, True, True, True, True, False],
    )
    out.line()
    out.table(
        ["time", "method", "predicted", "measured", "error"],
        time_rows(cal),
        right=[False, False, True, True, True],
    )
    if cal.measured is None:
        out.line()
        out.line("run with --verify to measure the target and compare")
    if plot is not None:
        out.line(f"wrote {plot}")
