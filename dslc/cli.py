"""The `dslc` command line: one click group, one function per command.

With its plumbing (`dslc.cli_ui`, `cli_failures`, `cli_values`, `cli_files`, `cli_compile`,
`cli_group`) and `dslc.render_rich` (plain or coloured output), this is the only layer of the
project that prints, colours or exits. Exit codes: 0 clean, 1 errors in the input (a diagnostic,
a runtime error such as an inadmissible point, a file that cannot be written), 2 usage errors
(click's own, a missing path, a malformed NAME=VALUE), 3 an internal error (a bug in dslc:
reported without a traceback unless DSLC_DEBUG is set).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from artifact.spelling import param_value
from dslc import __version__
from dslc.cli_compile import compile_files, load_book, pipeline_named, summary
from dslc.cli_failures import internal_error, runtime_errors
from dslc.cli_files import PATHS, wf_files, write_file
from dslc.cli_fmt import fmt_command
from dslc.cli_globals import with_global_options
from dslc.cli_group import DslcGroup
from dslc.cli_list import list_command
from dslc.cli_ui import Ui, examples, ui
from dslc.cli_values import POINT_METAVAR, assignments
from dslc.render_rich import (
    json_number,
    plural,
    show_number,
)

if TYPE_CHECKING:
    from dslc.explain import Explanation

HELP = """\
dslc: the compiler for workload formulas (`.wf` files).

A `.wf` file declares, per diffusion pipeline, its request params (their defaults are
the default workload), derived `let`s, and for every stage how many times its
repeated unit runs (`iterations = EXPR`) and what its activation memory and
per-iteration time are proportional to (`memory ~ EXPR`, `time ~ EXPR`):

\b
    pipeline minimax_h3 {
        param steps: int = 50 in [1, 1000]
        stage DenoisingStage { iterations = steps - 1 }
    }

dslc checks every formula over all admissible requests (iterations are
non-negative integers, nothing divides by zero, defaults lie in their ranges)
and builds one JSON artifact that a serving worker loads with
`runtime.load_formulas` to extrapolate a cheap warmup probe to the default
workload.

Workflow: write formulas/*.wf; `dslc fmt` and `dslc check` them; try values
with `dslc eval` and `dslc explain`; `dslc build` the artifact and ship it;
`dslc calibrate` a pipeline from a cheap probe, and `dslc plan` what stays on
the device.

Every command takes --json, --color, --width and --quiet (before or after its
name); a point is `NAME=VALUE[,...]`, the option repeatable (--set, --probe,
--target).
"""

EPILOG = """\
\b
Examples:
  dslc check formulas/                     # every *.wf below formulas/
  dslc check --strict --json formulas/
  dslc build formulas/ -o build/formulas.json
  dslc eval formulas/ wan2_2_t2v_a14b --set steps=4
  dslc eval build/formulas.json minimax_h3 --json
  dslc fmt --check formulas/
  dslc explain formulas/wan.wf wan2_2_t2v_a14b --probe steps=4,frames=17
  dslc calibrate --example flux --verify
  dslc plan --example flux --device-memory 24GiB

\b
Exit status: 0 ok, 1 errors in the input, 2 usage error, 3 internal error.
Colour is used only on a terminal and never when NO_COLOR is set.
"""


STRICT = click.option(
    "--strict", is_flag=True, help="Treat warnings (unproven properties) as errors."
)
SOURCE = click.argument("source", metavar="PATH", type=click.Path(exists=True, path_type=Path))


@click.group(
    "dslc", cls=DslcGroup, help=HELP, epilog=EPILOG, context_settings={"max_content_width": 100}
)
@click.version_option(__version__, prog_name="dslc")
@click.pass_context
def cli(ctx: click.Context) -> None:
    ctx.ensure_object(Ui)  # --color, --width, --quiet (dslc.cli_globals) may have made it


with_global_options(cli)


# --- commands --------------------------------------------------------------------------------


@cli.command(
    short_help="Check .wf files and print every diagnostic.",
    epilog=examples("dslc check", "dslc check --strict --json a.wf b.wf"),
)
@PATHS
@STRICT
@click.option("--json", "as_json", is_flag=True, help='Print {"diagnostics": [...]} on stdout.')
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["human", "json"]),
    default=None,
    hidden=True,
    help="Deprecated: --format json is --json.",
)
def check(paths: tuple[Path, ...], strict: bool, as_json: bool, output_format: str | None) -> None:
    """Check .wf files (and every *.wf below folders); print every diagnostic.

    PATH defaults to the repository's formulas/. Diagnostics go to stdout, a
    one-line summary to stderr. Exit 0 when clean (warnings allowed unless
    --strict), 1 on errors.
    """
    from dslc.compiler import compile_paths
    from dslc.diagnostics import to_json

    files = wf_files(paths)
    result = compile_paths(files, strict=strict)
    if as_json or output_format == "json":
        ui().out.json({"diagnostics": [to_json(d) for d in result.diagnostics]})
    else:
        for diagnostic in result.diagnostics:
            ui().out.diagnostic(diagnostic)
    ui().err.line(summary(result, files), style="green" if result.ok else "bold red")
    if not result.ok:
        raise click.exceptions.Exit(1)


@cli.command(epilog=examples("dslc build formulas/ -o build/formulas.json"))
@PATHS
@STRICT
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="OUT.json",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the artifact.",
)
@click.option(
    "--json", "as_json", is_flag=True, help='Print {"output", "pipelines", "files"} on stdout.'
)
def build(paths: tuple[Path, ...], strict: bool, output: Path, as_json: bool) -> None:
    """Check, then write the artifact (only when there are no errors).

    The file is written atomically: readers see the old file or the new one,
    never a partial one, and a failed build leaves an existing file untouched.
    """
    from dslc.build import emit_and_load

    files = wf_files(paths)
    result = compile_files(files, strict=strict)
    program = result.program
    # The runtime must accept what we emit; if it does not, that is a bug (exit 3).
    text, book = emit_and_load(program, result.emitted)
    for name in book:  # and compile it: the loader defers that to each pipeline's first use
        book[name].source  # noqa: B018
    write_file(output, text)
    if as_json:
        ui().out.json(
            {
                "output": str(output),
                "pipelines": list(program.pipelines),
                "files": [str(f) for f in files],
            }
        )
        return
    ui().out.line(
        f"wrote {output}: {plural(len(program.pipelines), 'pipeline')} "
        f"from {plural(len(files), 'file')}",
        style="green",
    )


@cli.command(
    "eval",
    short_help="Evaluate every stage of a pipeline.",
    epilog=examples(
        "dslc eval formulas/ wan2_2_t2v_a14b --set steps=4 --set cfg=false",
        "dslc eval build/formulas.json minimax_h3 --json",
    ),
)
@SOURCE
@click.argument("pipeline")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    callback=assignments,
    metavar=POINT_METAVAR,
    help="Override params of the default workload (int, 1_000 allowed, or true/false); repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the values as JSON.")
def eval_command(
    source: Path, pipeline: str, overrides: dict[str, int | bool], as_json: bool
) -> None:
    """Every stage of PIPELINE at the default workload with overrides.

    PATH is a built .json artifact, or a .wf file or a folder of them
    (compiled in memory, then loaded exactly as an artifact is).
    """
    book, _ = load_book(source)
    with runtime_errors():
        formulas = pipeline_named(book, pipeline, source)
        values = formulas.evaluate(**overrides)
        terms = _measure_terms(formulas, overrides)
    point = {**formulas.default_workload, **overrides}
    if as_json:
        stages: dict[str, dict[str, Any]] = {}
        for stage, v in values.items():
            stages[stage] = {
                "iterations": v.iterations,
                "memory": json_number(v.memory),
                "time": json_number(v.time),
            }
            for measure in ("memory", "time"):
                if (stage, measure) in terms:
                    found = terms[stage, measure]
                    stages[stage][f"{measure}_terms"] = [json_number(t) for t in found]
        ui().out.json({"pipeline": pipeline, "params": point, "stages": stages})
        return
    out = ui().out
    out.line(pipeline, style="bold")
    out.labelled("params: ", _point(point, overrides))
    rows = []
    for stage, v in values.items():
        rows.append([stage, show_number(v.iterations), show_number(v.memory), show_number(v.time)])
        rows += [
            [f"  memory[{i}]", "", show_number(t), ""]
            for i, t in enumerate(terms.get((stage, "memory"), ()))
        ]
        rows += [
            [f"  time[{i}]", "", "", show_number(t)]
            for i, t in enumerate(terms.get((stage, "time"), ()))
        ]
    out.table(["stage", "iterations", "memory", "time"], rows, right=[False, True, True, True])


def _measure_terms(
    formulas: Any, overrides: dict[str, int | bool]
) -> dict[tuple[str, str], tuple[int | Fraction, ...]]:
    """`(stage, "memory" or "time")` -> the terms of each measure that has several
    (`memory ~ [a, b]`), by the runtime."""
    found = {}
    for stage in formulas.stages:
        found[stage, "memory"] = formulas.memory_terms(stage, **overrides)
        found[stage, "time"] = formulas.time_terms(stage, **overrides)
    return {key: terms for key, terms in found.items() if len(terms) > 1}


def _point(point: dict[str, int | bool], changed: dict[str, int | bool]) -> list[str]:
    """`steps = 4 (set)`, `frames = 81`, ...: one item per param (`(none)` for no params)."""
    return [
        f"{name} = {param_value(value)}{' (set)' if name in changed else ''}"
        for name, value in point.items()
    ] or ["(none)"]


@cli.command(
    "explain",
    short_help="Show formulas and probe-to-target ratios.",
    epilog=examples(
        "dslc explain formulas/wan.wf wan2_2_t2v_a14b --probe steps=4,frames=17",
        "dslc explain formulas/ flux1_dev --probe steps=2,height=256,width=256 "
        "--target steps=28,height=1024,width=1024",
    ),
)
@SOURCE
@click.argument("pipeline")
@click.option(
    "--probe",
    multiple=True,
    callback=assignments,
    metavar=POINT_METAVAR,
    help="The probe's params that differ from the target; repeatable.",
)
@click.option(
    "--target",
    multiple=True,
    callback=assignments,
    metavar=POINT_METAVAR,
    help="The target's params that differ from the default workload; repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
def explain_command(
    source: Path,
    pipeline: str,
    probe: dict[str, int | bool],
    target: dict[str, int | bool],
    as_json: bool,
) -> None:
    """Each stage's formulas and their values at the probe and at the target.

    PATH is a .wf file or a folder. For each stage field: the formula with lets
    inlined, its value at the probe (the target with --probe overrides), at the
    target (the default workload with --target overrides, as `dslc calibrate`
    takes them), and the ratio target/probe, i.e. what a measurement at the
    probe is multiplied by.
    """
    from dslc.explain import explain

    if source.is_file() and source.suffix == ".json":
        raise click.BadParameter(
            "explain needs the .wf sources, not a built artifact", param_hint="PATH"
        )
    book, program = load_book(source)
    with runtime_errors():
        formulas = pipeline_named(book, pipeline, source)
        resolved = program.pipeline(pipeline) if program is not None else None
        assert resolved is not None, "sources (not an artifact) that hold the pipeline named"
        result = explain(resolved, formulas, probe, target)
    if as_json:
        ui().out.json(_explained_document(pipeline, result))
    else:
        _show_explained(pipeline, result, probe, target)


def _explained_document(pipeline: str, result: Explanation) -> dict[str, Any]:
    """`dslc explain --json`: each stage's fields, a measure's terms under its total."""
    stages: dict[str, dict[str, Any]] = {}
    for f in result.fields:
        entry = {
            "formula": f.formula,
            "declared": f.declared,
            "probe": json_number(f.probe),
            "target": json_number(f.target),
            "ratio": None if f.ratio is None else json_number(f.ratio),
        }
        fields = stages.setdefault(f.stage, {})
        if f.term is None:
            fields[f.field] = entry
        else:  # a measure's terms, in order, under the measure's total
            del entry["declared"]
            fields[f.field].setdefault("terms", []).append(entry)
    return {"pipeline": pipeline, "probe": result.probe, "target": result.target, "stages": stages}


def _show_explained(
    pipeline: str,
    result: Explanation,
    probe: dict[str, int | bool],
    target: dict[str, int | bool],
) -> None:
    """`dslc explain`'s table: the points, then a row a field."""
    out = ui().out
    out.line(pipeline, style="bold")
    out.labelled("probe:  ", _point(dict(result.probe), probe))
    shown = _point(dict(result.target), target)
    where = "" if target else " (the default workload)"
    out.labelled("target: ", [*shown[:-1], shown[-1] + where])
    out.table(
        ["stage", "field", "probe", "target", "ratio", "formula"],
        [
            [
                f.stage,
                f.label,
                show_number(f.probe),
                show_number(f.target),
                "-" if f.ratio is None else show_number(f.ratio),
                f"{f.operator} {f.formula}" + ("" if f.declared else "  (default)"),
            ]
            for f in result.fields
        ],
        right=[False, False, True, True, True, False],
    )


cli.add_command(list_command)
cli.add_command(fmt_command)


def main(argv: Sequence[str] | None = None) -> None:
    """The console script `dslc`."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="dslc")
    except Exception as exc:  # outside any command (should not happen): still no traceback
        if os.environ.get("DSLC_DEBUG"):
            raise
        internal_error(exc)
        sys.exit(3)


if __name__ == "__main__":
    main()
