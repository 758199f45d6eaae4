"""`dslc calibrate --plot FILE.png`: per-iteration peaks, and predicted vs measured per phase
(Agg).
"""

from __future__ import annotations

from pathlib import Path

from calibration.run import Calibration

MiB = float(1 << 20)


def plot(cal: Calibration, path: Path) -> None:
    """Left: each record's per-iteration peaks (MiB) by iteration index, with the predicted stage
    peak. Right: per phase, the raw prediction, the bound and (with --verify) the measured peak.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
            left.plot(xs, [y / MiB for y in ys], marker="o", label=f"{role}: {stage}")
    for stage in dict.fromkeys(stages):
        try:
            estimate = cal.estimate.phase(f"stage:{stage}").peak
        except KeyError:
            continue
        if estimate.raw_bytes is not None:
            left.axhline(
                estimate.raw_bytes / MiB, linestyle="--", color="grey", label=f"predicted {stage}"
            )
        if estimate.bound_bytes is not None:
            left.axhline(
                estimate.bound_bytes / MiB, linestyle=":", color="red", label=f"bound {stage}"
            )
    left.set_xlabel("iteration")
    left.set_ylabel("peak allocated (MiB)")
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
        right.bar(
            [x + offset for x in positions], [(v or 0) / MiB for v in values], width, label=name
        )
    right.set_xticks(positions)
    right.set_xticklabels(labels, rotation=30, ha="right", fontsize="small")
    right.set_ylabel("peak allocated (MiB)")
    right.set_yscale("log")
    right.set_title(f"{cal.pipeline} at {', '.join(f'{k}={v}' for k, v in cal.target.items())}")
    right.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
