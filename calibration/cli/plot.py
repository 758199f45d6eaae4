"""`dslc calibrate --plot FILE.png`: peaks per iteration and per stage, every phase's peak and
every stage's time, predicted vs measured (Agg).

Every axis starts at 0 with round ticks in one binary unit (0, 256 KiB, 512 KiB, ...), and the
target is spelled as the text spells it (`steps=8,cfg=true`).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from artifact.atomic import write_bytes_atomically
from artifact.spelling import point_text
from calibration.calibrate.run import Calibration, Comparison
from runtime.kinds import PhaseKind
from runtime.record import WarmupRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))
_STEPS = (1, 2, 2.5, 5, 10)


def round_ticks(top: float, scale: float = 1.0, count: int = 5) -> float:
    """A tick step of about `top / count` that is 1, 2, 2.5 or 5 times a power of ten, in units
    of `scale` (so 256 KiB, not 262,144 B shown as 256 KiB)."""
    if top <= 0:
        return scale
    raw = top / scale / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(s for s in _STEPS if s * power >= raw)
    return step * power * scale


def bytes_unit(top: float) -> tuple[str, int]:
    """The largest binary unit that `top` reaches."""
    return next(((n, s) for n, s in _UNITS if top >= s), _UNITS[-1])


def bytes_axis(axis: Axes, values: Sequence[float | None]) -> None:
    """From 0, with round ticks in one binary unit."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    top = max((v for v in values if v is not None), default=1.0) or 1.0
    name, scale = bytes_unit(top)
    step = round_ticks(top, scale)
    axis.yaxis.set_major_locator(MultipleLocator(step))
    axis.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / scale:g} {name}"))
    axis.set_ylim(0, math.ceil(top * 1.05 / step) * step)


def _time_axis(axis: Axes, values_ms: Sequence[float | None]) -> None:
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    top = max((v for v in values_ms if v is not None), default=1.0) or 1.0
    step = round_ticks(top)
    axis.yaxis.set_major_locator(MultipleLocator(step))
    axis.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g} ms"))
    axis.set_ylim(0, math.ceil(top * 1.05 / step) * step)


def _runs(cal: Calibration) -> list[tuple[str, WarmupRecord]]:
    """One run per role (repeats draw the same line), the measured target last."""
    seen: dict[str, WarmupRecord] = {}
    for role, record in zip(cal.roles, cal.records):
        seen.setdefault(role, record)
    if cal.measured is not None:
        seen["target (measured)"] = cal.measured
    return list(seen.items())


class _Style(TypedDict, total=False):
    """How a run's line is drawn (``Axes.plot``'s keywords)."""

    linewidth: float
    alpha: float
    linestyle: str
    marker: str
    zorder: int


def _style(role: str) -> _Style:
    """The warmup drawn wide underneath, the re-warm (the same size) thin and dashed on top."""
    if role == "warmup":
        return {"linewidth": 4, "alpha": 0.45, "marker": "o", "zorder": 1}
    if role == "re-warm":
        return {"linewidth": 1.2, "linestyle": "--", "marker": "x", "zorder": 3}
    return {"linewidth": 1.5, "marker": "o", "zorder": 2}


def _iterations(axis: Axes, cal: Calibration) -> list[float]:
    """Each run's per-iteration peaks, per repeated stage."""
    values: list[float] = []
    for role, record in _runs(cal):
        by_stage: dict[str, list[tuple[int, int]]] = {}
        for it in record.iterations:
            by_stage.setdefault(it.stage, []).append((it.index, it.peak_allocated))
        for stage, points in by_stage.items():
            xs, ys = zip(*sorted(points))
            axis.plot(xs, ys, label=f"{role}: {stage}", **_style(role))
            values += ys
    axis.set_xlabel("iteration")
    axis.set_ylabel("peak allocated")
    axis.set_title("per-iteration peaks (repeated stages)")
    return values


def _stages(axis: Axes, cal: Calibration) -> list[float]:
    """Every stage's peak in each run, beside its predicted peak and bound."""
    order: list[str] = []
    for _, record in _runs(cal):
        order += [
            p.name for p in record.phases if p.kind == PhaseKind.STAGE and p.name not in order
        ]
    positions = {stage: k for k, stage in enumerate(order)}
    values: list[float] = []
    for role, record in _runs(cal):
        peaks = {p.name: p.peak_allocated for p in record.phases if p.kind == PhaseKind.STAGE}
        xs = [positions[s] for s in order if s in peaks]
        ys = [peaks[s] for s in order if s in peaks]
        axis.plot(xs, ys, label=role, **_style(role))
        values += ys
    for stage, x in positions.items():
        try:
            estimate = cal.estimate.phase(f"stage:{stage}").peak
        except KeyError:
            continue
        for value, marker, name in (
            (estimate.raw_bytes, "_", "predicted"),
            (estimate.bound_bytes, "v", "bound"),
        ):
            if value is not None:
                axis.scatter(
                    [x],
                    [value],
                    marker=marker,
                    s=160,
                    color="black",
                    zorder=4,
                    label=name if x == 0 else None,
                )
                values.append(value)
    axis.set_xticks(list(positions.values()))
    axis.set_xticklabels(order, rotation=20, ha="right", fontsize="small")
    axis.set_ylabel("stage peak allocated")
    axis.set_title("every stage's peak, each run")
    return values


def _bars(axis: Axes, comparisons: Sequence[Comparison], series: Sequence[tuple[str, str]]) -> list:
    """Grouped bars: one group per comparison, one bar per (attribute, label) series."""
    width = 0.8 / max(len(series), 1)
    values: list[float] = []
    for k, (attribute, label) in enumerate(series):
        heights = [getattr(c, attribute) for c in comparisons]
        if all(v is None for v in heights):
            continue
        offset = (k - (len(series) - 1) / 2) * width
        axis.bar(
            [x + offset for x in range(len(comparisons))],
            [v or 0 for v in heights],
            width,
            label=label,
        )
        values += [v for v in heights if v is not None]
    axis.set_xticks(list(range(len(comparisons))))
    axis.set_xticklabels([c.label for c in comparisons], rotation=30, ha="right", fontsize="small")
    return values


def plot(cal: Calibration, path: Path) -> None:
    """Four panels: per-iteration peaks, every stage's peak per run, every phase's peak
    (predicted, bound, measured), every stage's time (predicted, measured); findings below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((iters, stages), (phases, times)) = plt.subplots(2, 2, figsize=(14, 10))
    bytes_axis(iters, _iterations(iters, cal))
    iters.legend(fontsize="x-small")
    bytes_axis(stages, _stages(stages, cal))
    stages.legend(fontsize="x-small")

    comparisons = [*cal.phases(), cal.request_peak()]
    bound = f"bound (margin {cal.estimate.margin:g})"
    series = [("predicted", "predicted"), ("bound", bound), ("measured", "measured")]
    bytes_axis(phases, _bars(phases, comparisons, series))
    phases.set_ylabel("peak allocated (every phase and the request)")
    phases.set_title(f"{cal.pipeline} at {point_text(cal.shapes.target)}")
    phases.legend(fontsize="small")

    timed = [*cal.stage_times(), cal.request_time()]
    _time_axis(times, _bars(times, timed, [("predicted", "predicted"), ("measured", "measured")]))
    times.set_ylabel("time (every stage and the request)")
    times.set_title("time per request")
    times.legend(fontsize="small")
    if cal.findings:
        fig.text(
            0.01,
            0.005,
            "\n".join(f"{f.kind}: {f.stage} {f.quantity}" for f in cal.findings),
            fontsize="small",
            color="darkred",
            va="bottom",
        )
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, dpi=100, format=path.suffix[1:].lower() or "png")
    plt.close(fig)
    write_bytes_atomically(path, image.getvalue())  # as --save: atomic, no FIFO or device
