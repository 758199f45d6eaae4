"""What `dslc calibrate` shows on a terminal: progress, tables, findings; saving the records."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from artifact.spelling import path_text, point_text
from calibration.calibrate.run import Calibration, Progress
from calibration.calibrate.verdict import OVER_PREDICTED, over_prediction, verdict
from calibration.probes.findings import NOTES
from dslc.cli_support import Failure, ui
from runtime.record import WarmupRecord


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Progress | None]:
    """A rich progress bar on stderr (only on a terminal); yields the progress callback."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr, markup=False, emoji=False, highlight=False)
    with Progress(
        TextColumn("calibrate"),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("starting", total=1)

        def tick(step: int, total: int, what: str) -> None:
            bar.update(task, completed=step, total=total, description=what)

        yield tick


@contextmanager
def progress() -> Iterator[Progress | None]:
    """The run's progress on stderr: a bar on a terminal, else one line per step (a piped run
    shows where it is too); nothing with --quiet."""
    current = ui()
    if current.quiet:
        yield None
    elif sys.stderr.isatty():
        with progress_bar(enabled=True) as tick:
            yield tick
    else:
        last: list[str] = []

        def line(step: int, total: int, what: str) -> None:
            if last != [what]:
                current.err.line(f"calibrate [{step}/{total}] {what}")
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
        raise Failure(f"cannot write {path}: {exc.strerror or exc}") from None
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


def show(cal: Calibration, plot: Path | None, *, strict: bool = False) -> None:
    from calibration.calibrate.report import memory_rows, show_bytes, show_ratio, time_rows

    out = ui().out
    out.line(
        f"{cal.pipeline}: {_source(cal.example)} on {cal.device} ({cal.backend}), "
        f"formulas {cal.formula_path}",
        style="bold",
    )
    shown = [("warmup", cal.warmup, ""), ("probe", cal.probe, "")]
    shown += [
        (f"probe {k + 2}", p, f"  ({why}; {cost:.3g}x the target)")
        for k, (p, why, cost) in enumerate(
            zip(cal.extra_probes, cal.extra_reasons, cal.extra_costs)
        )
    ]
    for role, point, why in (*shown, ("target", cal.target, "")):
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
    if cal.measured is None:
        out.line()
        out.line("run with --verify to measure the target and compare")
    out.line()
    out.line(verdict(cal, strict=strict).line, style="bold")


def _source(label: str) -> str:
    from calibration.examples import EXAMPLES

    return f"example {label}" if label in EXAMPLES else f"pipeline {label}"


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
