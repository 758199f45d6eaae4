"""`dslc plan`: from saved calibrations (or one it runs) and a device, what stays on it, and why.

A plugin command (entry point ``dslc.commands``); torch is imported only to run a calibration or
for ``--device-memory cuda:N``. Without ``--calibration`` it calibrates the pipeline chosen as
`dslc calibrate` chooses it (the same options, ``--device`` included), once per ``--target``, then
plans. What can be checked is checked before any calibration runs (usage errors, exit 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
import click
from click.core import ParameterSource

from calibration.cli.options import (
    Choice,
    FiniteRange,
    check_choice,
    device_option,
    packed,
    pipeline_options,
    run_calibration,
    run_options,
    shape_option,
)
from calibration.cli.outputs import checked_outputs
from calibration.cli.plan_device import capacities, device_from_options, size_value
from calibration.cli.plan_show import show_plan
from calibration.cli.plan_whole import unknown_whole, whole_option
from calibration.core.config import RunConfig
from calibration.core.shapes import Shapes
from calibration.plan.inputs import (
    Calibrated,
    UnknownWholeError,
    Whole,
    from_calibration,
    load_calibration,
)
from calibration.plan.model import (
    DEFAULT_BANDWIDTH,
    DEFAULT_PAGEABLE_FACTOR,
    Component,
    Device,
    Plan,
    PlanInputError,
    Target,
    most_cautious_targets,
)
from calibration.plan.report import document
from calibration.plan.solver import solve
from dslc.cli_support import POINT_METAVAR, Failure, cannot, ui

_EPILOG_LINES = (
    "\b",
    "Examples:",
    "  dslc plan --example flux --device-memory 24GiB       # calibrates tiny FLUX, then plans",
    "  dslc plan --example wan --target steps=8,frames=17,height=64,width=64 \\",
    "            --target steps=8,frames=33,height=64,width=64 --device-memory 1GiB --reserve 0",
    "  dslc calibrate --json > cal.json && dslc plan --calibration cal.json --device-memory 24GiB",
    "  dslc plan --calibration default.json --calibration largest.json --device-memory cuda:0 \\",
    "            --json",
    "  dslc plan --example flux --device-memory 3MiB --reserve 0 --validate   # apply, validate",
    "  dslc plan --calibration rank0.json --calibration rank1.json --device-memory 80GiB \\",
    "            --reserve 4GiB --bandwidth 12GB/s --pin-budget 64GiB",
    "",
    "\b",
    "Calibrations of the same target (ranks) merge to the most cautious; different targets are",
    "planned together (transfer summed over them). Exit 1 when nothing fits.",
)
EPILOG = "\n".join(_EPILOG_LINES)


def inputs(
    calibrations: Sequence[Calibrated],
) -> tuple[tuple[Component, ...], tuple[Target, ...]]:
    """Components (the heaviest report of each) and targets (ranks merged) from calibrations."""
    components: dict[str, Component] = {}
    reports: list[list[Target]] = []
    for cal in calibrations:
        for c in cal.components:
            if c.name not in components or c.weight_bytes > components[c.name].weight_bytes:
                components[c.name] = c
        reports.append([cal.target])
    return tuple(components.values()), most_cautious_targets(reports)


def _each_shape(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> list[dict[str, int | bool]]:
    """Every occurrence its own shape (`dslc calibrate --target` merges them into one)."""
    return [shape_option(ctx, param, [raw]) for raw in values]


_RUN_PARAMS = {  # parameter -> option: the ones that choose or shape a calibration to run
    "example": "--example",
    "factory": "--pipeline",
    "formulas_path": "--formulas",
    "name": "--name",
    "warmup": "--warmup",
    "probe": "--probe",
    "targets": "--target",
    "device": "--device",
    "offload": "--calibrate-offload",
    "capacity": "--device-capacity",
}


def calibrated(
    choice: Choice, shapes: Sequence[Shapes], config: RunConfig, whole: Whole = ()
) -> list[Calibrated]:
    """Run one calibration per target shape (progress on stderr, as `dslc calibrate` shows)."""
    from calibration.cli.show import progress, warn
    from calibration.errors import CalibrationError

    out = []
    for shape in shapes:
        try:
            with progress("plan") as tick:
                cal = run_calibration(choice, shape, config, progress=tick)
        except CalibrationError as exc:
            raise Failure(str(exc)) from None
        warn(cal)
        out.append(from_calibration(cal, whole))
    return out


@click.command(
    "plan", epilog=EPILOG, short_help="Plan what stays on the device: resident, offloaded, k of N."
)
@click.option(
    "--calibration",
    "calibrations",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A saved calibration (dslc calibrate --json / --save); repeatable. Without it, plan "
    "runs one: the pipeline, shape, run and --device options below are dslc calibrate's.",
)
@pipeline_options
@click.option(
    "--target",
    "targets",
    multiple=True,
    callback=_each_shape,
    metavar=POINT_METAVAR,
    help="A shape to calibrate and plan for; each occurrence one calibration, planned together "
    "[default: the example's demo target].",
)
@run_options
@device_option
@click.option(
    "--device-memory",
    required=True,
    multiple=True,
    callback=capacities,
    metavar="SIZE|cuda[:N]",
    help="The capacity planned for: 80GiB, 24GB, 1024B, or cuda:0 to read that device's; "
    "repeated, one per --calibration: each calibration a rank on its own device.",
)
@click.option(
    "--reserve",
    callback=size_value,
    metavar="SIZE",
    help="Kept free, below --device-memory [default: max(1 GiB, 2 %)].",
)
@click.option(
    "--bandwidth",
    callback=size_value,
    metavar="SIZE/s",
    help=f"Host-to-device bytes/s: 25GB/s [default: {DEFAULT_BANDWIDTH // 10**9}GB/s].",
)
@click.option(
    "--pin-budget",
    callback=size_value,
    metavar="SIZE",
    help="Pinned host memory; over it a host copy is pageable, slower [default: unlimited].",
)
@click.option(
    "--host-memory",
    callback=size_value,
    metavar="SIZE",
    help="Host memory for the host copies, pinned and pageable; a plan whose copies do not fit "
    "is refused, naming the host shortfall [default: unlimited].",
)
@click.option(
    "--pageable-factor",
    type=FiniteRange(1, 1000),
    default=DEFAULT_PAGEABLE_FACTOR,
    show_default=True,
    metavar="FACTOR",
    help="A pageable host copy's time per byte over a pinned one's (bench/copies.py measures it).",
)
@whole_option
@click.option("--json", "as_json", is_flag=True, help="One JSON document (docs/planning.md).")
@click.option(
    "--validate",
    "validate_mode",
    is_flag=False,
    flag_value="apply",
    default=None,
    type=click.Choice(["off", "plan", "apply", "strict"]),
    help="Run the serving lifecycle (docs/planning.md): plan, apply, validate on a measured "
    "request, roll back and re-plan; MODE apply (the default) or strict, off, plan. "
    "Exit 4 when no plan validates, 5 when strict refuses to serve.",
)
@click.option(
    "--rank-timeout",
    "rank_timeout",
    type=FiniteRange(0, 86400, min_open=True),
    default=None,
    metavar="SECONDS",
    help="With --validate on several ranks: the longest a rank waits for the others at a "
    "collective; then strict stops serving and apply falls back alone "
    "[default: 20 slowest requests, at least 60 s].",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Also explain each term of the report in full under it (placements, transfer, headroom).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE.png",
    help="Draw each phase's bytes on the device under the placement against usable (matplotlib).",
)
@packed
def plan(
    calibrations: tuple[Path, ...],
    choice: Choice,
    warmup: dict[str, int | bool],
    probe: dict[str, int | bool],
    targets: list[dict[str, int | bool]],
    config: RunConfig,
    device_memory: list[int],
    reserve: int | None,
    bandwidth: int | None,
    pin_budget: int | None,
    host_memory: int | None,
    pageable_factor: float,
    whole: Whole,
    as_json: bool,
    validate_mode: str | None,
    rank_timeout: float | None,
    explain: bool,
    plot: Path | None,
) -> None:
    """Plan component residency: resident, offloaded whole, or k of N layers on the device.

    The capacity is --device-memory (minus --reserve); the calibrations are saved ones
    (--calibration) or run here, on --device, as `dslc calibrate` runs them.
    """
    _no_run_options_with(calibrations)
    plot = _plot_usage(plot, validate_mode, len(device_memory))  # before anything runs
    if validate_mode is not None:  # usage first: before the formulas compile or anything runs
        _validate_usage(calibrations, targets)
    elif rank_timeout is not None:
        raise click.UsageError("--rank-timeout bounds the lifecycle's waits: give --validate")
    devices = [
        attrs.evolve(
            device_from_options(m, reserve, bandwidth, pin_budget, pageable_factor),
            host_memory_bytes=host_memory,
        )
        for m in device_memory
    ]
    planned_device = _one_or_per_rank(devices, len(calibrations), validate_mode)
    choice = check_choice(choice)
    shapes = [Shapes(warmup, probe, t) for t in targets or [{}]]
    if validate_mode is not None:
        lifecycle = (validate_mode, as_json, rank_timeout, whole)
        _validate(choice, shapes, config, planned_device, *lifecycle)
    if len(devices) > 1:
        raise click.exceptions.Exit(_ranks(calibrations, devices, as_json, whole))
    result, components, planned = _planned(
        calibrations, choice, shapes, config, whole, planned_device
    )
    _report(result, components, planned, as_json, explain)
    if plot is not None:
        _draw(result, plot)
    if not result.feasible:
        raise click.exceptions.Exit(1)


def _planned(
    calibrations: Sequence[Path],
    choice: Choice,
    shapes: Sequence[Shapes],
    config: RunConfig,
    whole: Whole,
    device: Device,
) -> tuple[Plan, tuple[Component, ...], tuple[Target, ...]]:
    """The saved calibrations read (or one run per shape), the full-weight needs in, the plan."""
    try:
        if calibrations:
            loaded = [load_calibration(path, whole=whole) for path in calibrations]
        else:
            loaded = calibrated(choice, shapes, config, whole)
        components, planned = inputs(loaded)
        return solve(components, planned, device), components, planned
    except UnknownWholeError as exc:
        raise unknown_whole(exc) from None
    except PlanInputError as exc:
        raise Failure(str(exc)) from None


def _report(
    result: Plan,
    components: Sequence[Component],
    planned: Sequence[Target],
    as_json: bool,
    explain: bool,
) -> None:
    """The JSON document, or the text report with its warning or error on stderr."""
    if as_json:
        ui().out.json(document(result, components))
        return
    show_plan(result, planned, explain)
    if result.feasible and not result.proven:
        ui().err.line(f"warning[plan-unproven]: {result.reason}", style="yellow")
    if not result.feasible:
        ui().err.line(f"error: nothing fits: {result.reason}", style="bold red")


def _draw(result: Plan, path: Path) -> None:
    """``--plot``: each phase's bytes on the device against usable, written atomically."""
    from calibration.cli.plan_plot import plot_plan
    from calibration.cli.show import wrote

    try:
        plot_plan(result, path)
    except OSError as exc:
        raise cannot("write", path, exc) from None
    wrote(path, "the plot")


def _plot_usage(plot: Path | None, validate_mode: str | None, ranks: int) -> Path | None:
    """``--plot`` draws one plan: not the lifecycle's, nor one per rank (exit 2); its path."""
    if plot is not None and (validate_mode is not None or ranks > 1):
        raise click.UsageError("--plot draws one plan: not with --validate or several ranks")
    return checked_outputs(plot, None, None)


def _one_or_per_rank(devices: Sequence[Device], ranks: int, validate_mode: str | None) -> Device:
    """The one device planned for; several are one per calibration (rank), never to validate."""
    if len(devices) > 1 and (validate_mode is not None or len(devices) != ranks):
        raise click.UsageError(
            f"{len(devices)} --device-memory: give one, or one per --calibration (each a rank), "
            "not with --validate"
        )
    return devices[0]


def _ranks(
    calibrations: Sequence[Path], devices: Sequence[Device], as_json: bool, whole: Whole = ()
) -> int:
    """Each calibration a rank on its own device (docs/planning.md "Ranks"): one placement for
    all when one fits every rank, else each rank its own; the exit status."""
    from calibration.plan.ranks import RankInputs, solve_ranks

    try:
        ranks = []
        for path, device in zip(calibrations, devices):
            components, targets = inputs([load_calibration(path, whole=whole)])
            ranks.append(RankInputs(components, targets, device))
        planned = solve_ranks(ranks)
    except UnknownWholeError as exc:
        raise unknown_whole(exc) from None
    except PlanInputError as exc:
        raise Failure(str(exc)) from None
    if as_json:
        ui().out.json(
            {
                "version": 1,
                "agreement": planned.agreement.value,
                "reason": planned.reason,
                "ranks": [document(p, r.components) for p, r in zip(planned.plans, ranks)],
            }
        )
    for number, (plan, rank) in enumerate(zip(planned.plans, ranks)):
        if not as_json:
            ui().out.line(f"rank {number} ({calibrations[number]}): {planned.agreement.value}")
            show_plan(plan, rank.targets)
            ui().out.line()
        if plan.feasible and not plan.proven:
            ui().err.line(f"warning[plan-unproven]: rank {number}: {plan.reason}", style="yellow")
    if not planned.feasible:
        ui().err.line(f"error: nothing fits: {planned.reason}", style="bold red")
        return 1
    return 0


def _validate_usage(calibrations: Sequence[Path], targets: Sequence[object]) -> None:
    """--validate runs the lifecycle on the pipeline for one target: usage errors otherwise."""
    if calibrations:
        raise click.UsageError("--validate runs the pipeline: give no --calibration")
    if len(targets) > 1:
        raise click.UsageError(
            f"--validate plans for one --target (given {len(targets)}): give the largest "
            "serving shape"
        )


def _validate(
    choice: Choice,
    shapes: list[Shapes],
    config: RunConfig,
    planned: Device,
    mode: str,
    as_json: bool,
    rank_timeout: float | None = None,
    whole: Whole = (),
) -> None:
    """Run the serving lifecycle (calibration.cli.validate) and exit with its status; with
    --json, whose document on stdout comes at the end, its start and end show on stderr."""
    from calibration.cli.validate import validate_command

    if as_json:
        ui().note(
            f"validate: calibrate, plan, apply and validate (mode {mode}) on {config.device}; "
            "this runs the pipeline several times"
        )
    status = validate_command(
        choice, shapes, config, planned, mode, as_json, rank_timeout_s=rank_timeout, whole=whole
    )
    if as_json:
        ui().note(f"validate: done (exit {status})")
    raise click.exceptions.Exit(status)


def _no_run_options_with(calibrations: Sequence[Path]) -> None:
    """Saved calibrations exclude the options that choose or shape a calibration to run."""
    ctx = click.get_current_context()
    given = [
        option
        for param, option in _RUN_PARAMS.items()
        if ctx.get_parameter_source(param) is not ParameterSource.DEFAULT
    ]
    if calibrations and given:
        raise click.UsageError(
            f"give saved calibrations (--calibration) or a pipeline to calibrate ({given[0]}), "
            "not both"
        )
