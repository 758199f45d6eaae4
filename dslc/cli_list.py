"""`dslc list`: the pipelines of an artifact or of sources, with their params and stages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from artifact.spelling import param_value
from dslc.cli_compile import load_book
from dslc.cli_files import default_formulas
from dslc.cli_ui import ui


def examples_epilog() -> str:
    return "\b\nExamples:\n  dslc list formulas/\n  dslc list build/formulas.json --json"


def param_rows(pipeline: Any) -> list[list[str]]:
    """param, type, default, range, contract: one row per param, as the language writes them."""
    return [
        [
            info.name,
            info.type,
            param_value(info.default),
            info.range_text or "-",
            " and ".join(info.contracts) or "-",
        ]
        for info in pipeline.params.values()
    ]


def pipeline_json(pipeline: Any) -> dict[str, Any]:
    return {
        "name": pipeline.name,
        "extends": pipeline.extends,
        "params": [
            {
                "name": info.name,
                "type": info.type,
                "default": info.default,
                "min": info.min,
                "max": info.max,
                "contracts": list(info.contracts),
            }
            for info in pipeline.params.values()
        ],
        "stages": list(pipeline.stages),
    }


@click.command("list", epilog=examples_epilog())
@click.argument(
    "source", metavar="[PATH]", required=False, type=click.Path(exists=True, path_type=Path)
)
@click.option("--json", "as_json", is_flag=True, help="Print the pipelines as JSON.")
def list_command(source: Path | None, as_json: bool) -> None:
    """List the pipelines in PATH with their params and stages.

    PATH is a built .json artifact, or a .wf file or a folder of them (compiled
    in memory first). For each param: its type, default (the default workload),
    range and contracts. PATH defaults to the repository's formulas/.
    """
    book, _ = load_book(source if source is not None else default_formulas())
    if as_json:
        ui().out.json({"pipelines": [pipeline_json(book[name]) for name in book]})
        return
    out = ui().out
    for number, name in enumerate(book):
        pipeline = book[name]
        if number:
            out.line()
        out.line(name + (f" (extends {pipeline.extends})" if pipeline.extends else ""), "bold")
        out.labelled("stages: ", list(pipeline.stages) or ["(none)"])
        rows = param_rows(pipeline)
        if rows:
            out.table(["param", "type", "default", "range", "contract"], rows, [False, False, True])
        else:
            out.line("no params")
