"""The options `dslc calibrate` and `dslc plan` share, and the one calibration run behind them.

Both commands choose a pipeline the same way (``pipeline_options``), run it the same way
(``run_options``) and calibrate it with ``run_calibration``; torch and diffusers are imported only
when a calibration runs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import click
from attrs import frozen

from artifact.limits import (
    MAX_MARGIN,
    MAX_REPEAT,
    MAX_SEED,
    MAX_THREADS,
    MAX_TIME_TOLERANCE,
    MIN_SEED,
)
from calibration.cli.offload_option import offload_options
from calibration.core.config import RunConfig
from calibration.core.shapes import Shapes
from calibration.examples import EXAMPLES
from calibration.probes.time_probe import TIME_TOLERANCE
from dslc.cli_support import POINT_METAVAR, REPO_FORMULAS, assignments
from dslc.cli_values import FiniteRange
from runtime.estimate.results import DEFAULT_MARGIN

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration, Progress
    from calibration.core.factory import Factory
    from runtime import Pipeline

Command = TypeVar("Command", bound=Callable[..., object])

#: The repository's formulas/ folder (beside the calibration package in a checkout).
FORMULAS = REPO_FORMULAS


def shape_option(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> dict[str, int | bool]:
    """`NAME=VALUE[,NAME=VALUE...]`, the option repeatable: as `dslc eval --set` reads them."""
    return assignments(ctx, param, values)


def seed_option(command: Command) -> Command:
    """``--seed``: within torch.manual_seed's range (calibrate, plan and infer)."""
    return click.option(
        "--seed",
        type=click.IntRange(MIN_SEED, MAX_SEED),
        default=0,
        show_default=True,
        help="Seed of the random weights and latents.",
    )(command)


def threads_within_cores(ctx: click.Context, param: click.Parameter, value: int) -> int:
    """``--threads`` at most the machine's cores: more only slows torch (or breaks its pool)."""
    cores = os.cpu_count() or 1
    if value > cores:
        raise click.BadParameter(f"{value} threads on {cores} cores (at most the cores)")
    return value


class DeviceType(click.ParamType):
    """Where a calibration runs and measures: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""

    name = "device"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        text = str(value).strip()
        if text in ("auto", "cpu", "cuda") or (
            text.startswith("cuda:") and text[5:].isdigit() and len(text) <= 12
        ):
            return text
        self.fail(f"{text!r} is not auto, cpu, cuda or cuda:N", param, ctx)


def device_option(command: Command) -> Command:
    """``--device``: where a calibration runs and measures (the same in calibrate and plan)."""
    return click.option(
        "--device",
        type=DeviceType(),
        default="auto",
        show_default=True,
        metavar="auto|cpu|cuda|cuda:N",
        help="Where the calibration runs and measures; auto: CUDA when available, else the CPU "
        "(exact live-tensor accounting).",
    )(command)


def model_options(command: Command) -> Command:
    """``--model DIR`` (a diffusers folder, local files only), ``--dtype`` and ``--variant``."""
    from calibration.core.folder import DTYPES

    for option in reversed(
        [
            click.option(
                "--model",
                type=click.Path(path_type=Path, file_okay=False),
                metavar="DIR",
                help="Your own pipeline from a diffusers folder (save_pretrained), read with "
                "local files only; needs --target and --probe.",
            ),
            click.option(
                "--dtype",
                type=click.Choice(DTYPES),
                help="With --model: the weights' dtype (from_pretrained's torch_dtype) "
                "[default: the folder's].",
            ),
            click.option(
                "--variant",
                metavar="NAME",
                help="With --model: the weights' variant (e.g. fp16: diffusion_pytorch_model."
                "fp16.safetensors).",
            ),
        ]
    ):
        command = option(command)
    return command


def user_option(choice: Choice) -> str | None:
    """The option that names the user's own pipeline (``--model`` or ``--pipeline``), if any;
    both at once, or --dtype/--variant without --model, are usage errors (exit 2)."""
    if choice.model is not None and choice.factory is not None:
        raise click.UsageError("give one of --model DIR or --pipeline MODULE:FACTORY, not both")
    if choice.model is None and (choice.dtype is not None or choice.variant is not None):
        raise click.UsageError("--dtype and --variant load the weights of --model DIR")
    if choice.model is not None:
        return "--model"
    return "--pipeline" if choice.factory is not None else None


def user_factory(choice: Choice) -> Factory | None:
    """The user's own pipeline (``--model`` or ``--pipeline``) as a factory; None: an example."""
    if choice.model is not None:
        from calibration.core.folder import folder_factory

        return folder_factory(choice.model, choice.dtype, choice.variant)
    if choice.factory is not None:
        from calibration.core.factory import load_factory

        return load_factory(choice.factory)
    return None


def check_choice(choice: Choice) -> Choice:
    """Usage checks before any work (exit 2): --pipeline or --model names its pipeline with
    --name, or the formulas hold exactly one, which is then the name. Formulas that do not compile
    are the compiler's diagnostics (exit 1), never a hint about --name they would hide."""
    option = user_option(choice)
    if option is None or choice.name is not None:
        return choice
    from dslc.build import NotCompiled, load_sources
    from dslc.cli_support import Failure

    try:
        names = list(load_sources([choice.formulas_path])) if choice.formulas_path.exists() else []
    except NotCompiled as exc:
        raise Failure(str(exc)) from None  # what `--name` would show: the calibration's error
    except OSError as exc:  # a name too long, a folder it may not read: the user's path
        raise click.BadParameter(
            f"cannot read {str(choice.formulas_path)[:200]!r}: {exc.strerror or exc}",
            param_hint="--formulas",
        ) from None
    if len(names) != 1:
        held = f"it holds {', '.join(sorted(names))}" if names else "name the pipeline"
        raise click.UsageError(
            f"{option} needs --name (the pipeline in {choice.formulas_path}; {held})"
        )
    return attrs.evolve(choice, name=names[0])


def pipeline_options(command: Command) -> Command:
    """The pipeline to calibrate (an example or yours) and its warmup and probe shapes."""
    for option in reversed(
        [
            click.option(
                "--example",
                type=click.Choice(sorted(EXAMPLES)),
                default="wan",
                show_default=True,
                help="Which built-in example pipeline to build (random weights, nothing "
                "downloaded).",
            ),
            click.option(
                "--pipeline",
                "factory",
                metavar="MODULE:FACTORY",
                help="Your own pipeline instead of an example: a callable (seed) -> diffusers "
                "pipeline, as module:function or path/to/file.py:function.",
            ),
            model_options,
            click.option(
                "--formulas",
                "formulas_path",
                type=click.Path(path_type=Path),
                default=FORMULAS,
                show_default="the repository's formulas/",
                help="A .wf file or a folder of them (compiled in memory).",
            ),
            click.option(
                "--name",
                metavar="PIPELINE",
                help="The pipeline in the formulas (default: the example's; with --pipeline: "
                "the only one in --formulas).",
            ),
            click.option(
                "--warmup",
                multiple=True,
                callback=shape_option,
                metavar=POINT_METAVAR,
                help="The bounded warmup (run before and after the probe); unset params: the "
                "probe's.",
            ),
            click.option(
                "--probe",
                multiple=True,
                callback=shape_option,
                metavar=POINT_METAVAR,
                help="The probe; unset params: the target's; repeatable.",
            ),
        ]
    ):
        command = option(command)
    return command


def run_options(command: Command) -> Command:
    """How a calibration runs: the margin, repeats, clock, seed, threads, time probes."""
    for option in reversed(
        [
            click.option(
                "--margin",
                type=FiniteRange(min=1.0, max=MAX_MARGIN),
                default=DEFAULT_MARGIN,
                show_default=True,
                help="Padding of what is extrapolated (the bound); the prediction itself uses 1.0.",
            ),
            click.option(
                "--repeat",
                type=click.IntRange(min=1, max=MAX_REPEAT),
                default=3,
                show_default=True,
                help="Run the probe and the re-warm (and a verified target) this many times; "
                "timings count by their median.",
            ),
            click.option(
                "--clock",
                type=click.Choice(["auto", "cpu", "wall"]),
                default="auto",
                show_default=True,
                help="cpu: the thread's CPU time (other processes do not count); auto: cpu on the "
                "CPU, else wall.",
            ),
            seed_option,
            click.option(
                "--threads",
                type=click.IntRange(min=1, max=MAX_THREADS),
                callback=threads_within_cores,
                default=1,
                show_default=True,
                help="CPU threads for torch (1 keeps timings steady on a shared machine).",
            ),
            click.option(
                "--time-tolerance",
                type=FiniteRange(min=0, min_open=True, max=MAX_TIME_TOLERANCE),
                default=TIME_TOLERANCE,
                show_default=True,
                help="Probe a larger size when two sigma of a stage's predicted time exceeds this "
                "share of the request's.",
            ),
            click.option(
                "--no-time-probe",
                is_flag=True,
                help="Never probe a larger size for time alone (the runs then depend only on the "
                "formulas).",
            ),
        ]
    ):
        command = option(command)
    return offload_options(command)


@frozen
class Choice:
    """Which pipeline: a built-in example, or the user's own (a factory, ``--pipeline``, or a
    diffusers folder, ``--model``) with its formulas."""

    example: str
    factory: str | None
    formulas_path: Path
    name: str | None
    model: Path | None = None
    dtype: str | None = None
    variant: str | None = None


#: The keyword arguments ``pipeline_options`` and ``run_options`` give a command, by field.
_CHOICE = ("example", "factory", "formulas_path", "name", "model", "dtype", "variant")
_RUN = (
    "device",
    "margin",
    "repeat",
    "clock",
    "seed",
    "threads",
    "time_tolerance",
    "offload",
    "capacity",
)


def packed(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` taking its pipeline options as one ``choice: Choice`` and its run options as
    one ``config: RunConfig`` (``--device`` too), as click passes them by name (the commands stay
    short)."""

    @functools.wraps(command)
    def with_values(**given: Any) -> None:  # Any: click's keyword arguments, one per option
        given["choice"] = Choice(**{key: given.pop(key) for key in _CHOICE})
        run = {key: given.pop(key) for key in _RUN}
        if given.pop("no_time_probe"):
            run["time_tolerance"] = None
        given["config"] = RunConfig(**run)
        command(**given)

    return with_values


def run_calibration(
    choice: Choice,
    shapes: Shapes,
    config: RunConfig,
    *,
    verify: bool = False,
    progress: Progress | None = None,
) -> Calibration:
    """Build the chosen pipeline and calibrate it (raises ``CalibrationError``)."""
    from calibration.calibrate.pipeline import Built, calibrate_configured
    from calibration.calibrate.run import load_pipeline
    from calibration.errors import CalibrationError

    config = config.placed()  # a plan file read before anything is built
    formulas_path = choice.formulas_path
    loaded = user_factory(choice)
    if loaded is not None:
        if choice.name is None:
            raise CalibrationError(
                f"{user_option(choice)} needs --name: the pipeline in the formulas"
            )
        pipeline = load_pipeline(formulas_path, choice.name)
        _module_shapes_fit(pipeline, loaded, loaded.spec)
        build, call_kwargs, label = loaded.build, loaded.call_kwargs, loaded.spec
        defaults = loaded.shapes(shapes)
    else:
        chosen = EXAMPLES[choice.example]
        if formulas_path.is_dir():
            formulas_path = formulas_path / chosen.formula_file
        pipeline = load_pipeline(formulas_path, choice.name or chosen.pipeline)
        build, call_kwargs, label = chosen.build, chosen.call_kwargs, chosen.name
        defaults = chosen.shapes
    built = Built(build, pipeline, defaults, call_kwargs, label, str(formulas_path))
    try:
        return calibrate_configured(built, shapes, config, verify=verify, progress=progress)
    except SystemExit as exc:  # the pipeline's call ran sys.exit: its failure, never exit 0
        raise CalibrationError(
            f"{label}: the pipeline's call ran sys.exit({exc.code!r}); a call that exits the "
            "interpreter cannot be measured"
        ) from None


def _module_shapes_fit(pipeline: Pipeline, loaded: Factory, factory: str) -> None:
    """The factory module's WARMUP, PROBE and TARGET name the pipeline's params with values of
    their types (``CalibrationError`` naming the module's shape, not the run's phase)."""
    from calibration.errors import CalibrationError

    module = factory.rpartition(":")[0]
    for attr, shape in loaded.given().items():
        for name, value in (shape or {}).items():
            param = pipeline.params.get(name)
            if param is None:
                raise CalibrationError(
                    f"--pipeline: {attr} of {module} names {name!r}, which pipeline "
                    f"{pipeline.name!r} does not declare ({', '.join(pipeline.params) or 'none'})"
                )
            if isinstance(value, bool) != (param.type == "bool"):
                raise CalibrationError(
                    f"--pipeline: {attr} of {module}: {name} takes "
                    f"{'a bool' if param.type == 'bool' else 'an int'}; got {value!r}"
                )
