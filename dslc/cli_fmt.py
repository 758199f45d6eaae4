"""`dslc fmt`: rewrite .wf files in canonical form, or show (--diff) or list (--check) changes."""

from __future__ import annotations

from pathlib import Path

import click

from dslc.cli_files import PATHS, wf_files, write_file
from dslc.cli_ui import examples, ui
from dslc.render_rich import plural


@click.command(
    "fmt",
    epilog=examples(
        "dslc fmt formulas/", "dslc fmt --check formulas/", "dslc fmt --check --diff a.wf"
    ),
)
@PATHS
@click.option(
    "--check", is_flag=True, help="Change nothing; list the files that would change, exit 1 if any."
)
@click.option(
    "--diff",
    is_flag=True,
    help="Change nothing; print a unified diff of each file that would change.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print {"changed", "unchanged", "errors"} (file lists) on stdout instead of lines.',
)
def fmt_command(paths: tuple[Path, ...], check: bool, diff: bool, as_json: bool) -> None:
    """Rewrite .wf files in canonical form, in place and atomically.

    A file that does not parse is reported and left alone (exit 1). With --diff
    (alone or with --check) nothing is written: stdout gets a unified diff per file.
    """
    from dslc.compiler import read_source
    from dslc.diagnostics import CompileError
    from dslc.fmt import format_source
    from dslc.parse import parse
    from dslc.source import SourceFile

    files = wf_files(paths)
    changed, broken = 0, 0
    lists: dict[str, list[str]] = {"changed": [], "unchanged": [], "errors": []}
    for path in files:
        source, problems = read_source(path)
        try:
            if source is None:
                raise CompileError(problems)
            formatted = format_source(source)
        except CompileError as exc:
            for diagnostic in exc.diagnostics:
                ui().err.diagnostic(diagnostic)
            broken += 1
            lists["errors"].append(str(path))
            continue
        if formatted == source.text:
            lists["unchanged"].append(str(path))
            continue
        if parse(SourceFile(source.name, formatted)) != parse(source):
            raise AssertionError(f"formatting {path} would change its meaning")
        changed += 1
        lists["changed"].append(str(path))
        if as_json:
            if not (check or diff):
                write_file(path, formatted)
        elif diff:
            for line in unified_diff(source.text, formatted, str(path)):
                ui().out.line(line, style=_DIFF_STYLES.get(line[:1]))
        elif check:
            ui().out.line(f"would reformat {path}")
        else:
            write_file(path, formatted)
            ui().out.line(f"reformatted {path}")
    verb = "would be reformatted" if check or diff else "reformatted"
    parts = [f"{plural(changed, 'file')} {verb}", f"{len(files) - changed - broken} unchanged"]
    if broken:
        parts.append(f"{broken} with errors (left unchanged)")
    failed = broken or (check and changed)
    if as_json:
        ui().out.json({**lists, "written": not (check or diff)})
    ui().err.line(", ".join(parts), style="bold red" if failed else "green")
    if failed:
        raise click.exceptions.Exit(1)


_DIFF_STYLES = {"+": "green", "-": "red", "@": "cyan"}


def unified_diff(before: str, after: str, name: str) -> list[str]:
    """`--- NAME` / `+++ NAME (formatted)` and the hunks, each line without its line ending."""
    import difflib

    return list(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            fromfile=name,
            tofile=f"{name} (formatted)",
            lineterm="",
        )
    )
