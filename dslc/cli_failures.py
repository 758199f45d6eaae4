"""How a `dslc` command fails: `error: ...` and exit 1 for wrong input (`Failure`, the runtime's
typed errors), one line and exit 3 for a bug (`internal_error`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import click

from artifact.spelling import path_text
from dslc.cli_ui import Ui, ui

__all__ = ["Failure", "cannot", "internal_error", "runtime_errors"]


class Failure(click.ClickException):
    """A one-line `error: ...` on stderr and exit 1: the input is wrong, not the invocation."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.err = ui().err

    def show(self, file: object = None) -> None:
        self.err.line(f"error: {self.message}", style="bold red")


def cannot(verb: str, path: str | os.PathLike[str], exc: OSError) -> Failure:
    """``cannot write PATH: why``, the path on one line whatever it holds (a newline, a tab, an
    undecodable byte): what every command says when the system refuses one of its files."""
    return Failure(f"cannot {verb} {path_text(path)}: {exc.strerror or exc}")


@contextlib.contextmanager
def runtime_errors() -> Iterator[None]:
    """The runtime's typed errors (unknown pipeline or param, wrong type, inadmissible point)."""
    from runtime import FormulaError

    try:
        yield
    except FormulaError as exc:
        raise Failure(str(exc)) from None


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
