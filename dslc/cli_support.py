"""Plumbing shared by the `dslc` commands (and commands added later, e.g. `calibrate`).

Output streams, the `error: ...` failure, NAME=VALUE options, file discovery, compiling with
diagnostics, atomic writes, loading a FormulaBook, and the internal-error guard. Part of the
command line: like `dslc.cli`, it may print and exit; nothing below the CLI imports it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import click

from dslc.limits import MAX_LITERAL_DIGITS
from dslc.render_rich import NumberTooLarge, Output, plural, use_color

_INT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")


class Ui:
    """The two output streams of one invocation, and whether notes (progress, `wrote`) show."""

    def __init__(self, color: str = "auto", width: int | None = None, quiet: bool = False):
        self.mode = color
        self.width = width
        self.quiet = quiet
        self.out = Output(sys.stdout, use_color(sys.stdout, color), width)
        self.err = Output(sys.stderr, use_color(sys.stderr, color), width)

    def note(self, text: str) -> None:
        """A line about the run, not its result (`wrote FILE`, a step), on stderr; not --quiet."""
        if not self.quiet:
            self.err.line(text)


def ui() -> Ui:
    ctx = click.get_current_context(silent=True)
    found = ctx.find_object(Ui) if ctx is not None else None
    return found if found is not None else Ui()


class Failure(click.ClickException):
    """A one-line `error: ...` on stderr and exit 1: the input is wrong, not the invocation."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.err = ui().err

    def show(self, file: Any = None) -> None:
        self.err.line(f"error: {self.message}", style="bold red")


@contextlib.contextmanager
def runtime_errors() -> Iterator[None]:
    """The runtime's typed errors (unknown pipeline or param, wrong type, inadmissible point)."""
    from runtime import FormulaError

    try:
        yield
    except FormulaError as exc:
        raise Failure(str(exc)) from None


def parse_value(name: str, text: str) -> int | bool:
    """`true`, `false`, or an integer (`1_000` allowed; as many digits as a literal may have)."""
    if text in ("true", "false"):
        return text == "true"
    if _INT.fullmatch(text):
        digits = text.replace("_", "").lstrip("+-")
        if len(digits) > MAX_LITERAL_DIGITS:
            raise click.BadParameter(f"{name}: more than {MAX_LITERAL_DIGITS} digits")
        return int(text.replace("_", ""))
    raise click.BadParameter(f"{name}: {text!r} is neither an integer nor true/false")


#: How every option that gives a point (`--set`, `--probe`, `--target`, `--warmup`) is written.
POINT_METAVAR = "NAME=VALUE[,...]"


def assignments(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> dict[str, int | bool]:
    """`NAME=VALUE[,NAME=VALUE...]` options, repeatable, as one dict (ints, `1_000` allowed, and
    true/false): `--set steps=4,frames=17` and `--set steps=4 --set frames=17` are the same."""
    result: dict[str, int | bool] = {}
    for raw in [part for value in values for part in value.split(",") if part.strip()]:
        name, sep, text = raw.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {raw!r}")
        if name in result:
            raise click.BadParameter(f"{name} is given twice")
        result[name] = parse_value(name, text)
    return result


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


def compile_files(files: list[Path], *, strict: bool = False) -> Any:
    """Compile; every diagnostic to stderr; on errors, a summary and exit 1."""
    from dslc.compiler import compile_paths

    result = compile_paths(files, strict=strict)
    for diagnostic in result.diagnostics:
        ui().err.diagnostic(diagnostic)
    if not result.ok:
        ui().err.line(summary(result, files), style="bold red")
        raise click.exceptions.Exit(1)
    return result


def summary(result: Any, files: Sequence[Path]) -> str:
    """`2 errors, 1 warning in 3 files` or `ok: 12 pipelines in 9 files`."""
    errors = len(result.errors)
    warnings = len(result.diagnostics) - errors
    where = plural(len(files), "file")
    if errors or not result.ok:
        counts = [plural(errors, "error")] + ([plural(warnings, "warning")] if warnings else [])
        return f"{', '.join(counts)} in {where}"
    extra = f" ({plural(warnings, 'warning')})" if warnings else ""
    return f"ok: {plural(len(result.program.pipelines), 'pipeline')} in {where}{extra}"


def write_file(path: Path, text: str) -> None:
    """Atomically (never a partial file), keeping an existing file's mode; else the umask's."""
    from dslc.emit import write_atomically

    try:
        write_atomically(path, text)
    except OSError as exc:
        raise Failure(f"cannot write {path}: {exc.strerror or exc}") from None


def load_book(source: Path) -> tuple[Any, Any]:
    """A FormulaBook from a `.json` artifact, or from `.wf` sources compiled in memory.

    Returns (book, program); program is None for an artifact. Either way the values come from
    the runtime evaluator, loaded from JSON text exactly as a serving worker loads it.
    """
    from runtime import load_formulas

    if source.is_file() and source.suffix == ".json":
        try:
            with runtime_errors():
                return load_formulas(source), None
        except OSError as exc:
            raise Failure(f"cannot read {source}: {exc.strerror or exc}") from None
    from dslc.build import load_program

    result = compile_files(wf_files([source]))
    return load_program(result.program, result.emitted), result.program


def pipeline_named(book: Any, name: str, source: Path) -> Any:
    """`book[name]`; an unknown name fails naming the closest pipelines and `dslc list SOURCE`."""
    from runtime import UnknownPipelineError

    try:
        return book[name]
    except UnknownPipelineError as exc:
        from artifact.errors import one_of

        where = "artifact" if source.is_file() and source.suffix == ".json" else "sources"
        hint = f"; did you mean {one_of(exc.closest)}?" if exc.closest else ""
        raise Failure(
            f"no pipeline {name!r} in the {where} {source}{hint} "
            f"(list all {len(exc.known)} with: dslc list {source})"
        ) from None


def internal_error(exc: BaseException) -> None:
    """One line naming the exception (its message's first line, shortened), and what to do."""
    message = (str(exc).splitlines() or [""])[0]
    if len(message) > 300:
        message = message[:300] + "..."
    Ui().err.line(f"internal error: {type(exc).__name__}: {message}", style="bold red")
    Ui().err.line(
        "this is a bug in dslc; please report it with the command and the input files "
        "(run with DSLC_DEBUG=1 to see the traceback)"
    )


#: Entry-point group of commands that other packages add to `dslc` (calibration adds
#: `calibrate` and `plan`); loaded only when listed or run, so the compiler never imports them.
PLUGIN_GROUP = "dslc.commands"


def plugin_commands() -> dict[str, EntryPoint]:
    """The installed plugin commands by name (not imported)."""
    return {ep.name: ep for ep in entry_points(group=PLUGIN_GROUP)}


class DslcGroup(click.Group):
    """Any exception escaping a command is a bug: one line, no traceback, exit 3.

    Commands of other packages (entry points in ``dslc.commands``) join the built-in ones lazily.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *plugin_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from dslc.cli_globals import with_global_options

        command = super().get_command(ctx, cmd_name)
        if command is None:
            plugin = plugin_commands().get(cmd_name)
            loaded = plugin.load() if plugin is not None else None
            command = loaded if isinstance(loaded, click.Command) else None
        return None if command is None else with_global_options(command)

    def invoke(self, ctx: click.Context) -> Any:
        # Python's int-to-text digit guard stays on: huge values print as their leading digits and
        # digit count (render_rich.show_int), and `--json` refuses what it cannot print exactly.
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise
        except NumberTooLarge as exc:
            raise Failure(str(exc)) from None
        except ModuleNotFoundError as exc:
            if os.environ.get("DSLC_DEBUG"):
                raise
            missing = (exc.name or "").partition(".")[0]
            if missing and missing not in _OUR_PACKAGES:
                # an install without a dependency (torch, diffusers, ...): the machine's, not ours
                raise Failure(
                    f"the Python package {missing!r} is not installed, and this command needs "
                    "it: install the project with its dependencies (README.md, the setup command)"
                ) from None
            internal_error(exc)
            ctx.exit(3)
        except OSError as exc:
            if exc.filename is None:  # not about a path the user gave: ours
                if os.environ.get("DSLC_DEBUG"):
                    raise
                internal_error(exc)
                ctx.exit(3)
            # a path the user gave that the system refuses (a name too long, no permission, a
            # full disk): their input or their machine, named, exit 1
            name = str(exc.filename)
            shown = (
                name if len(name) <= 120 else f"{name[:60]}...{name[-40:]} ({len(name):,} chars)"
            )
            raise Failure(f"cannot use {shown}: {exc.strerror or exc}") from None
        except Exception as exc:
            if os.environ.get("DSLC_DEBUG"):
                raise
            internal_error(exc)
            ctx.exit(3)


_OUR_PACKAGES = frozenset({"dslc", "artifact", "runtime", "calibration", "bench", "tests"})

#: The `[PATH...]` argument of check, build and fmt (none: the repository's formulas/).
PATHS = click.argument(
    "paths",
    nargs=-1,
    required=False,
    metavar="[PATH...]",
    type=click.Path(exists=True, path_type=Path),
)


def examples(*lines: str) -> str:
    """A command's epilog: example lines that click must not rewrap."""
    title = "Examples:" if len(lines) > 1 else "Example:"
    return "\b\n" + title + "\n" + "\n".join(f"  {line}" for line in lines)
