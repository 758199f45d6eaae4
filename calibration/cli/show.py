"""What `dslc calibrate` shows on a terminal: progress, tables, findings; saving the records."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from artifact.spelling import path_text, point_text
from calibration.calibrate.run import Calibration, Progress
from calibration.calibrate.verdict import OVER_PREDICTED, over_prediction, verdict
from calibration.probes.findings import NOTES
from dslc.cli_support import cannot, ui
from runtime.record import WarmupRecord

#: A step still running after this many seconds of the run shows an estimate of the time left.
LONG_S = 10.0


def progress_line(
    command: str, step: int, total: int, what: str, elapsed_s: float, stepping_s: float
) -> str:
    """One piped progress line: the command, the step of a total known up front (none while it
    is not known yet, at step 0), the time elapsed and, on a long run, the time left at the pace
    of the steps so far (``stepping_s`` since step 1 began; an upper bound when the total is)."""
    if step <= 0:
        return f"{command} {_clock(elapsed_s)} {what}"
    left = ""
    if 1 < step < total and elapsed_s >= LONG_S:
        left = f", ~{_clock(stepping_s / (step - 1) * (total - step + 1))} left"
    return f"{command} [{step}/{total}] {_clock(elapsed_s)}{left} {what}"


def _clock(seconds: float) -> str:
    """``0:07``, ``12:30``, ``1:02:03``: elapsed time as a clock shows it."""
    whole = max(int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    text = f"{rest // 60}:{rest % 60:02d}"
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else text


@contextmanager
def progress_bar(command: str) -> Iterator[Progress]:
    """A rich progress bar on stderr: the command, the step of its total, elapsed and left."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as Bar

    console = Console(file=sys.stderr, markup=False, emoji=False, highlight=False)
    columns = (TextColumn(command), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Bar(
        *columns,
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("starting", total=None)

        def tick(step: int, total: int, what: str) -> None:
            known = total if step > 0 else None  # step 0: before the total is known
            bar.update(task, completed=max(step - 1, 0), total=known, description=what)

        yield tick


@contextmanager
def progress(
    command: str, clock: Callable[[], float] = time.monotonic
) -> Iterator[Progress | None]:
    """The run's progress on stderr, labelled ``command``: a bar on a terminal, else one line
    per step (a piped run shows where it is too); nothing with --quiet."""
    current = ui()
    if current.quiet:
        yield None
    elif sys.stderr.isatty():
        with progress_bar(command) as tick:
            yield tick
    else:
        last: list[str] = []
        start = clock()
        first: list[float] = []  # when step 1 began: the pace counts from there

        def line(step: int, total: int, what: str) -> None:
            now = clock()
            if step > 0 and not first:
                first.append(now)
            if last != [what]:
                since = now - first[0] if first else 0.0
                current.err.line(progress_line(command, step, total, what, now - start, since))
                last[:] = [what]

        yield line


def wrote(path: Path, what: str) -> None:
    """The note every written file gets (on stderr: stdout may carry --json)."""
    ui().note(f"wrote {path_text(path)} ({what})")


def save_records(path: Path, cal: Calibration) -> None:
    from runtime.record import save_records as save

    records = [*cal.records, *([cal.measured] if cal.measured is not None else [])]
    try:
        save(path, records)
    except OSError as exc:
        raise cannot("write", path, exc) from None
    wrote(path, "the warmup records")


#: The memory table's columns: each peak includes the weights on the device (`dslc plan`'s
#: "activation bound" leaves them out).
MEMORY_HEADERS = [
    "memory",
    "method",
    "margin",
    "predicted peak",
    "peak bound",
    "measured peak",
    "error",
    "bound >= measured",
]
MEMORY_RIGHT = [False, False, False, True, True, True, True, False]
TIME_HEADERS = ["time", "method", "predicted", "two sigma", "measured", "error"]
TIME_RIGHT = [False, False, True, True, True, True]


def show(
    cal: Calibration,
    plot: Path | None,
    *,
    strict: bool = False,
    save: Path | None = None,
    explain: bool = False,
) -> None:
    """The tables between a headline and the verdict; a legend and the next command unless
    --quiet; with ``explain``, each term in full under them (--quiet or not)."""
    from calibration.calibrate.report import memory_rows, show_bytes, show_ratio, time_rows
    from calibration.cli.guide import LEGEND, explained, headline, next_line

    out, quiet = ui().out, ui().quiet
    out.line(headline(cal), style="bold")
    shown = [("warmup", cal.shapes.warmup, ""), ("probe", cal.shapes.probe, "")]
    shown += [
        (f"probe {k + 2}", e.point, f"  ({e.reason}; {e.cost:.3g}x the target)")
        for k, e in enumerate(cal.extras)
    ]
    for role, point, why in (*shown, ("target", cal.shapes.target, "")):
        out.line(f"{role + ':':8} " + point_text(point, sep=", ") + why)
    out.line(
        f"the target is {show_ratio(cal.work_ratio)}x the probe (iterations x memory measure of "
        f"the repeated stage); the extra sizes cost {cal.extra_cost:.3g}x the target, one run "
        f"each; fixed margin {cal.estimate.margin:g}"
    )
    weights = sum(cal.component_weight_bytes.values())
    by_role: dict[str, list[WarmupRecord]] = {}
    for role, record in zip(cal.roles, cal.records):
        by_role.setdefault(role, []).append(record)
    out.line(
        f"weights {show_bytes(weights)}; peaks: "
        + ", ".join(
            f"{role} {show_bytes(max(r.peak_allocated for r in records))}"
            + (f" ({len(records)} runs)" if len(records) > 1 else "")
            for role, records in by_role.items()
        )
    )
    out.line()
    out.table(MEMORY_HEADERS, memory_rows(cal), right=MEMORY_RIGHT)
    out.line()
    out.table(TIME_HEADERS, time_rows(cal), right=TIME_RIGHT)
    if not quiet:
        out.line()
        for line in LEGEND:
            out.line(line)
    if cal.measured is None:
        out.line()
        out.line("run with --verify to measure the target and compare")
    out.line()
    out.line(verdict(cal, strict=strict).line, style="bold")
    if not quiet:
        out.line(next_line(save))
    if explain:
        out.line()
        for line in explained():
            out.line(line)


def warn(cal: Calibration) -> None:
    """Findings, undeclared components and failed requests, on stderr."""
    err = ui().err
    for notice in cal.notices:
        err.line(f"warning[target-below-probe]: {notice}", style="yellow")
    for warning in cal.call_warnings:
        err.line(f"warning[call-argument]: {warning}", style="yellow")
    for finding in cal.findings:
        if finding.kind in NOTES:  # not to act on: what it means, no `next:`; --quiet drops it
            ui().note(f"note[{finding.kind}]: {finding.message}; {finding.next_step}", "yellow")
            continue
        err.line(
            f"warning[{finding.kind}]: {finding.message}; next: {finding.next_step}",
            style="yellow",
        )
    over = over_prediction(cal)
    if over is not None:
        ui().note(f"note[{OVER_PREDICTED}]: {over.message}", style="yellow")
    for name in cal.uncovered:
        err.line(
            f"warning[uncovered]: the target departs from the probe in {name}, but no size cheaper "
            "than the target moves it alone, so a dependence on it the formula leaves out would "
            f"not show; probe with a smaller {name} (--probe) or a larger target",
            style="yellow",
        )
    for below in cal.below_minimum:
        err.line(f"warning[probe-below-minimum]: {below.message}", style="yellow")
    for name in cal.undeclared:
        err.line(
            f"warning[undeclared-component]: component {name!r} ran outside every declared stage; "
            "add it to a stage's `uses` in the formula file",
            style="yellow",
        )
    for name in cal.unobserved:
        err.line(
            f"warning[unobserved-component]: component {name!r} was never seen active: no op "
            "read its weights in any phase; the plan charges it its full weights in every "
            "phase; run it in the warmup (declare its method in a stage's `uses`) to measure it",
            style="yellow",
        )
    for line in cal.errors:  # its first line: torch appends a C++ stack to some messages
        first = (line.splitlines() or [""])[0]
        err.line(f"warning: a request failed: {first[:300]}", style="yellow")
