"""`dslc calibrate --plot FILE.png`: per-iteration peaks, and predicted vs measured per phase
(Agg).
"""

from __future__ import annotations

import io
from pathlib import Path

from artifact.atomic import write_bytes_atomically
from calibration.report import show_bytes
from calibration.run import Calibration


def plot(cal: Calibration, path: Path) -> None:
    """Left: each run's per-iteration peaks, with each stage's predicted peak and bound.
    Right: every phase and the request: the prediction, the bound and (--verify) the measured peak,
    on linear byte axes (KiB/MiB/GiB); findings in red below.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    bytes_axis = FuncFormatter(lambda value, _: show_bytes(value))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 1.6]})
    runs = [*zip(cal.roles, cal.records)] + (
        [("target (measured)", cal.measured)] if cal.measured else []
    )
    stages = []
    seen = set()
    for role, record in runs:
        if role in seen:  # repeated runs of one size draw the same line
            continue
        seen.add(role)
        by_stage: dict[str, list[tuple[int, int]]] = {}
        for it in record.iterations:
            by_stage.setdefault(it.stage, []).append((it.index, it.peak_allocated))
        for stage, points in by_stage.items():
            stages.append(stage)
            xs, ys = zip(*sorted(points))
            style = "--" if role == "re-warm" else "-"  # warmup and re-warm: one size, two runs
            left.plot(xs, ys, marker="o", linestyle=style, label=f"{role}: {stage}")
    for stage in dict.fromkeys(stages):
        try:
            estimate = cal.estimate.phase(f"stage:{stage}").peak
        except KeyError:
            continue
        if estimate.raw_bytes is not None:
            left.axhline(
                estimate.raw_bytes, linestyle="--", color="grey", label=f"predicted {stage}"
            )
        if estimate.bound_bytes is not None:
            left.axhline(estimate.bound_bytes, linestyle=":", color="red", label=f"bound {stage}")
    left.set_xlabel("iteration")
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.yaxis.set_major_formatter(bytes_axis)
    left.set_ylabel("peak allocated")
    left.set_title("per-iteration peaks")
    left.legend(fontsize="small")

    comparisons = [*cal.phases(), cal.request_peak()]
    labels = [c.label for c in comparisons]
    positions = list(range(len(labels)))
    width = 0.27
    for offset, name, values in (
        (-width, "predicted", [c.predicted for c in comparisons]),
        (0.0, f"bound (margin {cal.estimate.margin:g})", [c.bound for c in comparisons]),
        (width, "measured", [c.measured for c in comparisons]),
    ):
        if all(v is None for v in values):
            continue
        right.bar([x + offset for x in positions], [v or 0 for v in values], width, label=name)
    right.set_xticks(positions)
    right.set_xticklabels(labels, rotation=30, ha="right", fontsize="small")
    right.set_ylabel("peak allocated (every phase and the request)")
    right.yaxis.set_major_formatter(bytes_axis)
    right.set_title(f"{cal.pipeline} at {', '.join(f'{k}={v}' for k, v in cal.target.items())}")
    right.legend(fontsize="small")
    if cal.findings:
        fig.text(
            0.01,
            0.01,
            "\n".join(f"{f.kind}: {f.stage} {f.quantity}" for f in cal.findings),
            fontsize="small",
            color="darkred",
            va="bottom",
        )
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, dpi=110, format=path.suffix[1:].lower() or "png")
    plt.close(fig)
    write_bytes_atomically(path, image.getvalue())  # as --save: atomic, no FIFO or device
