"""`dslc infer`: measure a pipeline on a bounded ladder of cheap sizes and draft its formulas.

A plugin command of `dslc` (entry point ``dslc.commands``); torch and diffusers are imported only
when it runs. The work lives in ``calibration.infer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from artifact.limits import MAX_REQUEST_SECONDS
from artifact.spelling import point_text
from calibration.cli.offload_option import offload_options
from calibration.cli.options import model_options, seed_option, shape_option
from calibration.examples import EXAMPLES
from calibration.infer.axes import Axis, AxisError, parse_axis, skeleton_text
from calibration.infer.deadline import REQUEST_SECONDS
from calibration.infer.ladder import DEFAULT_SIZES, MAX_SIZES
from dslc.cli_support import Failure, cannot, ui
from dslc.cli_values import FiniteRange

if TYPE_CHECKING:
    from calibration.cli.infer_inputs import Skeleton
    from calibration.core.factory import Factory
    from calibration.infer.analyse import StageProposal
    from calibration.infer.run import Inference


def axes_option(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[Axis, ...]:
    """Each --axis parsed; a text that cannot be placed is a usage error naming its bad part."""
    try:
        return tuple(parse_axis(v) for v in values)
    except AxisError as exc:
        raise click.BadParameter(str(exc)) from None


def axes_skeleton(name: str, axes: tuple[Axis, ...]) -> str:
    """The skeleton the axes declare, compiled as a file is: its errors are exit 1, named --axis."""
    from dslc.compiler import compile_text

    try:
        text = skeleton_text(name, axes)
    except AxisError as exc:
        raise click.BadParameter(str(exc), param_hint="--axis") from None
    result = compile_text(text, "<--axis>")
    if not result.ok:
        shown = "\n".join(str(d) for d in result.diagnostics)
        raise Failure(f"the skeleton of --axis does not compile:\n{text}{shown}")
    return text


def switch_notes(proposals: Sequence[StageProposal]) -> list[str]:
    """What flipping a bool param left open (--json: stages[].switches): a switch that changed
    nothing anywhere (the call may not turn it on: FLUX's true CFG also needs a negative prompt),
    then each stage's quantity no factor explains (the draft holds the base's terms there)."""

    from calibration.infer.report import unchanged_switches

    out = [
        f"note[switch]: {s.at} changed no stage's memory, work or iteration "
        f"count at {s.sizes} sizes: do the call's arguments turn it on (FLUX's true CFG also "
        "needs a negative_prompt)? The draft has no factor for it"
        for s in unchanged_switches(proposals)
    ]
    for p in proposals:
        for s in (s for s in p.switches if s.review):
            said = {"iterations": s.iterations, "memory": s.memory, "time": s.time}
            what = "; ".join(f"{name}: {said[name]}" for name in s.review)
            out.append(
                f"note[switch]: {p.plan.name}: at {s.at}, {what}: the draft holds the terms of "
                f"{s.param}={'false' if s.value else 'true'} only there; review it "
                "(--json: stages[].switches)"
            )
    return out


def time_notes(proposals: Sequence[StageProposal]) -> list[str]:
    """Where a stage's measured times are off the draft's `time ~` (the report has the numbers):
    the draft is the counted work's, the same in every run; this verdict moves with the machine."""
    from calibration.infer.time_terms import MAX_TIME_TERMS

    out = []
    for p in proposals:
        check = p.time.measured
        if check.checked or not check.sizes:
            continue
        written = ", ".join(m.text for m in p.time.terms) or "constant"
        instead = (
            f"they fit {check.alternative}"
            if check.alternative
            else f"no set of up to {MAX_TIME_TERMS} terms fits them"
        )
        out.append(
            f"note[time]: {p.plan.name}: the measured times per iteration are off `time ~ "
            f"{written}` by {check.worst:.3g} x the tolerance at {len(check.misses)} of "
            f"{check.sizes} sizes ({instead}): recheck the time line on your device "
            "(--json: stages[].time.measured)"
        )
    return out


def failed_runs(result: Inference) -> list[str]:
    """The requests that failed, grouped by their error (each an open item: the proposals had
    those sizes missing; --json: sizes[].ok and .error)."""
    runs = [m.record for m in result.measured] + list(result.repeats) + list(result.work)
    by_error: dict[str, list[str]] = {}
    for record in (r for r in runs if not r.ok):
        error = record.error
        message = (error.message.splitlines() or [""])[0][:160] if error else ""
        key = f"{error.type}: {message}" if error else "no error recorded"
        by_error.setdefault(key, []).append(point_text(record.params))
    out = []
    for key, points in by_error.items():
        shown = "; ".join(dict.fromkeys(points[:3])) + (" ..." if len(points) > 3 else "")
        runs_text = "1 run" if len(points) == 1 else f"{len(points)} runs"
        out.append(f"{runs_text} failed ({key}) at {shown}")
    return out


EPILOG = """\b
Examples:
  dslc infer --example flux --params skeleton.wf -o draft.wf
  dslc infer --example flux --axis 'steps=28 in [1, 1000] -> num_inference_steps' \\
      --axis 'height=1024 in [16, 4096] where height % 16 == 0 -> height probe' \\
      --axis 'width=1024 in [16, 4096] where width % 16 == 0 -> width probe' \\
      --axis 'cfg=false -> true_cfg_scale=4 else 1' -o draft.wf
  dslc infer --pipeline tests/calibration/custom_pipeline.py:build \\
      --params tests/calibration/data/skeletons/custom_sd.wf \\
      --base steps=2,height=32,width=32 -o draft.wf --json > report.json

\b
Limits: at most 6 int params; 48 sizes in the ladder, plus the steps ladder again one level up
when memory moves with steps; monomials of up to 3 params; up to 3 terms a stage;
at most 60,000 term sets a search (12,000 a probe minimum tried); time: up to 3 terms giving
the counted work (FLOPs + 16 x bytes) exactly, else within 2 %; the measured times are checked
within 2 ms + max(3 x the base's spread, 20 %) against sets of up to 2 monomials; the first
2 bool params flipped at the counted sizes and the steps ladder: each term kept, doubled or split
(a doubled or a one-value part), and the factor alone (at most 1,029 sets a stage)."""


@click.command(
    "infer", epilog=EPILOG, short_help="Measure a pipeline and propose its formula file."
)
@click.option(
    "--example",
    type=click.Choice(sorted(EXAMPLES)),
    help="A built-in example pipeline (random weights, nothing downloaded).",
)
@click.option(
    "--pipeline",
    "factory",
    metavar="MODULE:FACTORY",
    help="Your own pipeline: a callable (seed) -> diffusers pipeline, as module:function or "
    "path/to/file.py:function.",
)
@model_options
@click.option(
    "--params",
    "skeleton",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="SKELETON.wf",
    help="One pipeline with its params, `call` and `probe` lines and no stages.",
)
@click.option(
    "--axis",
    "axes",
    multiple=True,
    callback=axes_option,
    metavar="'NAME=DEFAULT [in [LO, HI]] [where COND] [-> ARG[=EXPR]] [probe]'",
    help="Instead of --params: one param, repeatable (a bool: NAME=true|false [-> ARG=A else "
    "B]); the axes marked probe form the probe group.",
)
@click.option(
    "--name",
    metavar="PIPELINE",
    help="The pipeline's name in a draft from --axis (default: the example's; with --pipeline: "
    "the factory's function name).",
)
@click.option(
    "--base",
    multiple=True,
    callback=shape_option,
    metavar="NAME=VALUE[,...]",
    help="The cheap size the ladder starts from (default: the example's or the factory "
    "module's WARMUP, else the cheapest admissible size).",
)
@click.option(
    "--max-sizes",
    type=click.IntRange(1, MAX_SIZES),
    default=DEFAULT_SIZES,
    show_default=True,
    metavar="N",
    help=f"The most sizes the ladder measures (at most {MAX_SIZES}): more steps and frames "
    "where there is room, the cheapest first.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="DRAFT.wf",
    help="Write the draft here (default: stdout, unless --json).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE.png",
    help="Draw each stage's measured memory per size and each fitted term's part (matplotlib).",
)
@offload_options
@click.option("--json", "as_json", is_flag=True, help="Print the report (every size, candidate).")
@seed_option
@click.option(
    "--timeout",
    type=FiniteRange(min=0, min_open=True, max=MAX_REQUEST_SECONDS),
    default=REQUEST_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="Wall-clock seconds one request may take; a call past it fails that size.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Also exit 5 when a proposal is open: no iteration formula or memory set, a time only "
    "guessed, a bool param no factor explains, that changed nothing or whose runs failed.",
)
def infer(
    example: str | None,
    factory: str | None,
    model: Path | None,
    dtype: str | None,
    variant: str | None,
    skeleton: Path | None,
    axes: tuple[Axis, ...],
    name: str | None,
    base: dict[str, int | bool],
    max_sizes: int,
    output: Path | None,
    plot: Path | None,
    as_json: bool,
    seed: int,
    timeout: float,
    strict: bool,
    offload: str,
    capacity: int | None,
) -> None:
    """Measure a diffusers pipeline on a bounded ladder of cheap sizes and propose its stages.

    Discovers which components run and which one runs once per step, measures a ladder of cheap
    sizes around the base (on the CPU: exact memory), and proposes each stage's iterations (the
    smallest formula of a small grammar), memory terms (the fewest monomials that fit every size
    exactly), time terms (the fewest giving the work counted op by op; the measured times checked
    within their spread), `probe NAME >= N` minimums: a checked, formatted draft."""
    from calibration.cli.infer_inputs import checked_base, pipeline_source
    from calibration.cli.outputs import check_writable, plot_path
    from calibration.cli.show import progress
    from calibration.core.offload import calibrating_under, placing
    from calibration.errors import CalibrationError
    from calibration.infer.deadline import request_seconds
    from calibration.infer.run import infer as run_infer

    _usage(example, factory, model, skeleton, axes, name, weights=(dtype, variant))
    plot = None if plot is None else plot_path(plot)  # `figure` is figure.png; a bad format: 2
    check_writable([("-o", output), ("--plot", plot)])  # before minutes of measuring
    try:
        checked = _skeleton(skeleton, axes, name or _default_name(example, factory, model))
        chosen = pipeline_source(example, factory, _folder(model, dtype, variant))
        point = checked_base(checked.pipeline, [chosen.start, ("--base", base)])
        with (
            progress("infer") as tick,
            request_seconds(timeout),
            calibrating_under(placing(offload), capacity),
        ):
            result = run_infer(
                chosen.build,  # type: ignore[arg-type]
                checked.text,
                base=point,
                call_kwargs=chosen.call_kwargs,
                seed=seed,
                progress=tick,
                header=_header(chosen.label, Path(checked.source).name if skeleton else "--axis"),
                max_sizes=max_sizes,
            )
    except CalibrationError as exc:
        raise Failure(str(exc)) from None
    _show(result, output, as_json, strict, plot)


def _header(label: str, source: str) -> str:
    """The draft's first line: where its pipeline and its skeleton came from."""
    return f"# Drafted by `dslc infer` from {label} and {source}: review each proposal.\n"


def _folder(model: Path | None, dtype: str | None, variant: str | None) -> Factory | None:
    """``--model DIR`` as a factory (checked before anything is measured), or None."""
    if model is None:
        return None
    from calibration.core.folder import folder_factory

    return folder_factory(model, dtype, variant)


def _default_name(example: str | None, factory: str | None, model: Path | None) -> str:
    """A draft's pipeline name when --name gives none: the example's, the factory's function's
    or the --model folder's name, else ``drafted``."""
    if example:
        default = EXAMPLES[example].pipeline
    elif model is not None:
        default = "".join(c if c.isalnum() else "_" for c in model.resolve().name.lower())
    else:
        default = (factory or "").rsplit(":", 1)[-1]
    return default if default.isidentifier() else "drafted"


def _usage(
    example: str | None,
    factory: str | None,
    model: Path | None,
    skeleton: Path | None,
    axes: tuple[Axis, ...],
    name: str | None,
    weights: tuple[str | None, str | None] = (None, None),
) -> None:
    """Exactly one pipeline and one skeleton source, --name only with --axis, and ``weights``
    (--dtype, --variant) only with --model (exit 2)."""
    if sum(given is not None for given in (example, factory, model)) != 1:
        raise click.UsageError(
            "give one of --example NAME, --pipeline MODULE:FACTORY or --model DIR"
        )
    if model is None and weights != (None, None):
        raise click.UsageError("--dtype and --variant load the weights of --model DIR")
    if (skeleton is None) == (not axes):
        raise click.UsageError("give one of --params SKELETON.wf or --axis ... (repeated)")
    if name is not None and not axes:
        raise click.UsageError("--name names the pipeline of a draft from --axis")


def _skeleton(skeleton: Path | None, axes: tuple[Axis, ...], name: str) -> Skeleton:
    """The --params file or the --axis texts (the draft named ``name``), compiled."""
    from calibration.cli.infer_inputs import checked_skeleton, read_skeleton

    if skeleton is not None:
        return checked_skeleton(read_skeleton(skeleton), str(skeleton))
    return checked_skeleton(axes_skeleton(name, axes), "--axis")


def _show(
    result: Inference, output: Path | None, as_json: bool, strict: bool, plot: Path | None = None
) -> None:
    """The draft (file or stdout), the figure, the notes, the report, then the open items
    (--strict: 5)."""
    from calibration.cli.show import wrote
    from calibration.infer.report import open_proposals, report

    if output is not None:
        from artifact.atomic import write_atomically

        try:
            write_atomically(output, result.draft)
        except OSError as exc:
            raise cannot("write", output, exc) from None
    if plot is not None:
        _draw(result, plot)
    for line in [*switch_notes(result.proposals), *time_notes(result.proposals)]:
        ui().note(line, style="yellow")  # notes: --quiet drops them
    if output is not None:  # the note on stderr, with --json too (stdout carries the report)
        failed = sum(not m.record.ok for m in result.measured)
        wrote(
            output,
            f"{len(result.proposals)} stages from {len(result.measured)} sizes"
            + (f", {failed} of them failed" if failed else ""),
        )
    if as_json:
        ui().out.json(report(result))
    elif output is None:
        click.echo(result.draft, nl=False)
    still = [*open_proposals(result.proposals), *failed_runs(result)]
    if still:
        ui().err.line(
            f"{len(still)} open proposal{'s' if len(still) > 1 else ''} to review: "
            + "; ".join(still),
            style="yellow",
        )
        if strict:
            raise click.exceptions.Exit(5)


def _draw(result: Inference, path: Path) -> None:
    """``--plot``: each stage's measured memory and its fitted terms' parts."""
    from calibration.cli.infer_plot import plot_inference
    from calibration.cli.show import wrote

    try:
        plot_inference(result.proposals, path)
    except OSError as exc:
        raise cannot("write", path, exc) from None
    wrote(path, "the plot")
