"""`dslc plan --validate[=MODE]`: the whole lifecycle on an example or ``--pipeline``, shown.

The command (``calibration.cli.plan``) parses its options and calls ``validate_command``; this
module builds the pipeline and its session as `dslc calibrate` does, runs ``run_lifecycle`` and
prints each step and the verdict (or the --json document). Returns the exit status.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from calibration.cli.options import Choice
from calibration.cli.plan_whole import unknown_whole
from calibration.core.config import RunConfig
from calibration.core.shapes import Shapes
from calibration.errors import CalibrationError
from calibration.lifecycle.model import Mode
from calibration.lifecycle.render import document, lines
from calibration.lifecycle.run import Outcome, run_lifecycle
from calibration.lifecycle.steps import Settings
from calibration.plan.inputs import UnknownWholeError, Whole
from calibration.plan.model import Device
from calibration.plan.report import show_bytes

if TYPE_CHECKING:
    from calibration.calibrate.pipeline import Built

MODES = tuple(m.value for m in Mode)


def built_choice(choice: Choice, shapes: Shapes) -> Built:
    """The chosen example or factory with its formulas (`dslc calibrate`'s choice)."""
    from calibration.calibrate.pipeline import Built
    from calibration.calibrate.run import load_pipeline
    from calibration.cli.options import user_factory, user_option
    from calibration.examples import EXAMPLES

    loaded = user_factory(choice)
    if loaded is not None:
        if choice.name is None:
            option = user_option(choice)
            raise CalibrationError(f"{option} needs --name: the pipeline in the formulas")
        formulas = load_pipeline(choice.formulas_path, choice.name)
        return Built(loaded.build, formulas, loaded.shapes(shapes), loaded.call_kwargs)
    chosen = EXAMPLES[choice.example]
    path = choice.formulas_path
    formulas = load_pipeline(path / chosen.formula_file if path.is_dir() else path, chosen.pipeline)
    return Built(chosen.build, formulas, chosen.shapes, chosen.call_kwargs)


def lifecycle(
    choice: Choice,
    shapes: Shapes,
    config: RunConfig,
    device: Device,
    mode: str,
    rank_timeout_s: float | None = None,
    whole: Whole = (),
) -> Outcome:
    """Build the pipeline on ``config.device`` (auto, cpu, cuda:N) and run the lifecycle in
    ``mode``, planning for ``device``."""
    from calibration.calibrate.run import shapes as full_shapes
    from calibration.core.host import quiet_libraries, resolve_device, torch_threads
    from calibration.core.session import Session
    from runtime.measure.distributed import agreement

    config = config.placed()  # a plan file read before anything is built
    built = built_choice(choice, shapes)
    full = full_shapes(
        built.formulas,
        built.defaults,
        target=shapes.target,
        probe=shapes.probe,
        warmup=shapes.warmup,
    )
    config = attrs.evolve(config, device=resolve_device(config.device))
    with quiet_libraries(), torch_threads(config.device, config.threads):
        session = Session.open(
            built.build(config.seed),  # type: ignore[arg-type]  # checked by pipeline_facts
            built.formulas,
            config,
            call_kwargs=built.call_kwargs,
        )
        return run_lifecycle(
            session,
            full,
            Settings(
                device,
                mode,
                margin=config.margin,
                repeat=config.repeat,
                agreement=agreement(),  # the process group's when torch.distributed runs
                rank_timeout_s=rank_timeout_s,
                whole=whole,
            ),
        )


def validate_command(
    choice: Choice,
    shapes: Sequence[Shapes],
    config: RunConfig,
    device: Device,
    mode: str,
    as_json: bool,
    *,
    rank_timeout_s: float | None = None,
    whole: Whole = (),
) -> int:
    """Run the lifecycle, print the steps and the verdict (or the JSON); the exit status."""
    from dslc.cli_support import Failure, ui

    if len(shapes) != 1:
        raise Failure("--validate plans for one --target: give the largest serving shape")
    try:
        outcome = lifecycle(choice, shapes[0], config, device, mode, rank_timeout_s, whole)
    except UnknownWholeError as exc:
        raise unknown_whole(exc) from None
    except CalibrationError as exc:
        raise Failure(str(exc)) from None
    report = outcome.report
    if as_json:
        ui().out.json(document(report, outcome.records))
        return report.status
    header = (
        f"mode {report.mode}; device {show_bytes(device.capacity_bytes)}, reserve "
        f"{show_bytes(device.reserve)}, usable {show_bytes(device.usable_bytes)}"
    )
    for line in lines(report, header):
        ui().out.line(line)
    return report.status
