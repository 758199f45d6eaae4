"""What `dslc calibrate` and `dslc plan` will write, checked before anything expensive runs.

A calibration takes minutes; a path it cannot write, or a figure format nobody draws, is refused
first: an unknown ``--plot`` format is a usage error (exit 2); a target that exists and is not a
regular file (a FIFO, ``/dev/null``, a link to one), or a folder that cannot hold it, exit 1 as
``--save`` and ``dslc build -o`` refuse them. Every file is written through
``artifact.atomic`` (a temporary file renamed over the target).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from artifact.atomic import NotARegularFileError, check_regular
from artifact.limits import MAX_INT_DIGITS
from artifact.spelling import path_text
from dslc.cli_support import Failure

DEFAULT_PLOT_SUFFIX = ".png"
_TOO_MANY_DIGITS = 10**MAX_INT_DIGITS  # the smallest int str() and json refuse


def checked_outputs(plot: Path | None, save: Path | None, records: Path | None) -> Path | None:
    """`dslc calibrate`'s outputs checked up front; the figure's path as it will be written."""
    if plot is not None:
        plot = plot_path(plot)
    check_writable([("--plot", plot), ("--save", save), ("--records", records)])
    return plot


def plot_path(path: Path) -> Path:
    """The figure's path: ``figure`` becomes ``figure.png``; an unknown format is exit 2."""
    if not path.name:  # "", ".", "/": a folder, not a figure's name
        raise click.BadParameter(f"{str(path)!r} names no file", param_hint="--plot")
    if not path.suffix:
        path = path.with_name(path.name + DEFAULT_PLOT_SUFFIX)
    formats = _figure_formats()
    if path.suffix[1:].lower() not in formats:
        raise click.BadParameter(
            f"{path_text(path)}: matplotlib cannot draw {path.suffix!r}; give one of "
            + ", ".join(f".{f}" for f in sorted(formats)),
            param_hint="--plot",
        )
    return path


def _figure_formats() -> frozenset[str]:
    """The formats matplotlib's Agg canvas writes (``FILE.png``, ``.pdf``, ``.svg`` ...)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise Failure(
            "--plot needs matplotlib (pip install 'workload-formulas[examples]')"
        ) from None
    return frozenset(FigureCanvasAgg.get_supported_filetypes())


def check_writable(paths: Sequence[tuple[str, Path | None]]) -> None:
    """Each ``(option, path)`` given can be written: not a special file, its folder creatable."""
    for option, path in paths:
        if path is not None:
            _writable(option, path)


def _writable(option: str, path: Path) -> None:
    target, shown = Path(os.path.realpath(path)), path_text(path)
    try:
        check_regular(target)
    except NotARegularFileError as exc:
        raise Failure(f"{option}: cannot write {shown}: {exc.strerror}") from None
    except OSError as exc:
        raise Failure(f"{option}: cannot write {shown}: {exc.strerror or exc}") from None
    folder = target.parent
    while not folder.exists():  # the writer creates missing folders: the first existing decides
        folder = folder.parent
    if not folder.is_dir():
        raise Failure(f"{option}: cannot write {shown}: {path_text(folder)} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise Failure(f"{option}: cannot write {shown}: {path_text(folder)} is not writable")


def check_json(doc: Mapping[str, object], what: str) -> None:
    """The document can be written as JSON: every integer within the 4,300 digits JSON readers
    (ours included) accept; else exit 1 naming the first key too large."""
    try:
        json.dumps(doc)
    except ValueError:
        where = _huge(doc, "")
        raise Failure(
            f"{what}: {where or 'a value'} has over {MAX_INT_DIGITS:,} digits, more than a JSON "
            "reader takes; the target is beyond any device: narrow it or the formulas' ranges"
        ) from None


def _huge(value: object, place: str) -> str | None:
    """The place of the first int over the digit limit (``phases[2].predicted_peak_bytes``)."""
    stack: list[tuple[object, str]] = [(value, place)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, int) and abs(item) >= _TOO_MANY_DIGITS:
            return at
        if isinstance(item, Mapping):
            stack.extend(reversed([(v, f"{at}.{k}" if at else str(k)) for k, v in item.items()]))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(v, f"{at}[{i}]") for i, v in enumerate(item)]))
    return None
