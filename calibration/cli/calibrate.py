"""`dslc calibrate`: warm up a diffusers pipeline, estimate a target, optionally verify it.

A plugin command of `dslc` (entry point ``dslc.commands``). Everything heavy (torch, diffusers) is
imported only when the command runs. The loop lives in ``calibration.calibrate.run``, the document
and tables in ``calibration.calibrate.report``, what a terminal shows in ``calibration.cli.show``,
the figure in ``calibration.cli.plot``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from artifact.spelling import point_text
from calibration.cli.options import (
    Choice,
    check_choice,
    device_option,
    packed,
    pipeline_options,
    run_calibration,
    run_options,
    shape_option,
)
from calibration.core.config import RunConfig
from calibration.core.shapes import Shapes
from calibration.examples import EXAMPLES
from dslc.cli_support import POINT_METAVAR, Failure, cannot, ui

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration


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
        "  dslc calibrate --pipeline my_pipes.py:build --formulas my_model.wf \\",
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
@pipeline_options
@click.option(
    "--target",
    multiple=True,
    callback=shape_option,
    metavar=POINT_METAVAR,
    help="The target to estimate; unset params: the example's demo target, then the default "
    "workload; repeatable.",
)
@device_option
@click.option(
    "--verify",
    is_flag=True,
    help="Also run the target for real and compare; exit 4 when a bound is under the measured "
    "peak or a request failed.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Also exit 5 on a finding to act on (formula-mismatch, iteration-mismatch), a param "
    "the target departs in that no size could move, or a component never seen active.",
)
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
    "--explain",
    is_flag=True,
    help="Also explain each term of the tables in full under them (the legend's, at length).",
)
@run_options
@packed
def calibrate(
    choice: Choice,
    warmup: dict[str, int | bool],
    probe: dict[str, int | bool],
    target: dict[str, int | bool],
    verify: bool,
    strict: bool,
    as_json: bool,
    plot: Path | None,
    save: Path | None,
    records_path: Path | None,
    explain: bool,
    config: RunConfig,
) -> None:
    """Calibrate a diffusers pipeline on a cheap probe and estimate a target.

    Compiles the formulas (in memory), builds the pipeline (a built-in example from tiny
    configs with random weights, or yours with --pipeline), wires it to a recorder from
    the formulas' facts (`uses`, `per step`, `call`), and records a bounded warmup, the
    probe, the extra probes that pin down every declared term at the target, and a
    bounded re-warm. It checks the measured sizes against the formulas (warnings:
    formula-mismatch, probe-regime) and estimates, at the target, every phase's peak
    memory (the prediction, and the bound with the margin), the request's peak and
    time, and the layer uses. With --verify it runs the target too, once a round beside the
    sizes, and compares.
    """
    from calibration.calibrate.verdict import verdict
    from calibration.cli.outputs import checked_outputs
    from calibration.cli.show import progress, warn
    from calibration.errors import CalibrationError

    choice = check_choice(choice)
    plot = checked_outputs(plot, save, records_path)  # before minutes of calibration
    try:
        with progress("calibrate") as tick:
            cal = run_calibration(
                choice,
                Shapes(warmup, probe, target),
                config,
                verify=verify,
                progress=tick,
            )
    except CalibrationError as exc:
        raise Failure(str(exc)) from None
    _write(cal, records_path, plot, save, as_json, strict, explain)
    warn(cal)
    undo = cal.undo_failed
    if undo is not None:  # the measurement is written; the pipeline keeps part of the placement
        left = "; ".join(f"{name}: {what}" for name, what in undo.left_in_place)
        raise Failure(f"calibrated, but {undo.reason}; left in place: {left}")
    status = verdict(cal, strict=strict).status
    if status:
        raise click.exceptions.Exit(status)


def _write(
    cal: Calibration,
    records_path: Path | None,
    plot: Path | None,
    save: Path | None,
    as_json: bool,
    strict: bool,
    explain: bool = False,
) -> None:
    """The records, the figure and the document where asked, then the JSON or the tables."""
    from calibration.cli.outputs import check_json
    from calibration.cli.show import save_records, show, wrote

    if records_path is not None:
        save_records(records_path, cal)
    if plot is not None:
        from calibration.cli.plot import plot as draw

        try:
            draw(cal, plot)
        except OSError as exc:
            raise cannot("write", plot, exc) from None
        wrote(plot, "the plot")
    if as_json or save is not None:
        from calibration.calibrate.report import document

        doc = document(cal, strict=strict)
        check_json(doc, "--save" if save is not None else "--json")
        if save is not None:
            from artifact.atomic import write_atomically

            try:
                write_atomically(save, json.dumps(doc, indent=2) + "\n")
            except OSError as exc:
                raise cannot("write", save, exc) from None
            wrote(save, "the calibration document")
        if as_json:
            ui().out.json(doc)
            return
    show(cal, plot, strict=strict, save=save, explain=explain)
