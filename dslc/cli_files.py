"""The files a `dslc` command reads and writes: `[PATH...]` arguments, `*.wf` discovery (the
repository's formulas/ by default), atomic writes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from dslc.cli_failures import cannot

__all__ = ["PATHS", "REPO_FORMULAS", "default_formulas", "wf_files", "write_file"]


#: The repository's formulas/ folder: what `check`, `list` and `calibrate` read without a PATH.
REPO_FORMULAS = Path(__file__).resolve().parents[1] / "formulas"


def default_formulas() -> Path:
    """The repository's formulas/ when no PATH is given; a usage error when there is none."""
    if not REPO_FORMULAS.is_dir():
        raise click.UsageError(f"give a PATH (there is no {REPO_FORMULAS} to default to)")
    return REPO_FORMULAS


def wf_files(paths: Sequence[Path]) -> list[Path]:
    """The files as given and every `*.wf` below the folders; none at all is a usage error.

    No paths at all: the repository's formulas/."""
    from dslc.compiler import discover

    paths = list(paths) or [default_formulas()]
    files, problems = discover(paths)
    if problems:
        raise click.BadParameter(problems[0].message, param_hint="PATH")
    if not files:
        raise click.BadParameter(f"no .wf files in {', '.join(map(str, paths))}", param_hint="PATH")
    return files


def write_file(path: Path, text: str) -> None:
    """Atomically (never a partial file), keeping an existing file's mode; else the umask's."""
    from dslc.emit import write_atomically

    try:
        write_atomically(path, text)
    except OSError as exc:
        raise cannot("write", path, exc) from None


#: The `[PATH...]` argument of check, build and fmt (none: the repository's formulas/).
PATHS = click.argument(
    "paths",
    nargs=-1,
    required=False,
    metavar="[PATH...]",
    type=click.Path(exists=True, path_type=Path),
)
