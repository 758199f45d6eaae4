"""`dslc plan --plot FILE.png`: each phase's bytes on the device under the placement (the weights
there and the activation bound on top) against usable, one bar per phase of each target (Agg)."""

from __future__ import annotations

import io
from pathlib import Path

from artifact.atomic import write_bytes_atomically
from calibration.plan.model import PhaseUse, Plan
from calibration.plan.report import show_bytes


def _label(use: PhaseUse, targets: int) -> str:
    """The phase, under its target where several are planned together."""
    return use.label if targets == 1 else f"{use.target}\n{use.label}"


def plot_plan(result: Plan, path: Path) -> None:
    """One panel: per phase, the weights on the device and the activation bound stacked, usable
    (and the capacity, where a reserve is kept) as lines; a plan where nothing fits is drawn
    with no bars and its reason as the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from calibration.cli.plot import bytes_axis

    uses = list(result.phases) if result.feasible else []
    targets = len({u.target for u in uses})
    fig, axis = plt.subplots(figsize=(max(6.0, 1.4 * len(uses) + 2), 6))
    xs = list(range(len(uses)))
    weights = [u.weights_bytes for u in uses]
    axis.bar(xs, weights, 0.6, label="weights on the device (resident + onloaded)")
    axis.bar(xs, [u.bound_bytes for u in uses], 0.6, bottom=weights, label="activation bound")
    device = result.device
    axis.axhline(device.usable_bytes, color="black", linestyle="--", label="usable")
    values: list[float | None] = [
        device.usable_bytes,
        *(u.bound_bytes + u.weights_bytes for u in uses),
    ]
    if device.reserve:
        axis.axhline(device.capacity_bytes, color="grey", linestyle=":", label="capacity")
        values.append(device.capacity_bytes)
    bytes_axis(axis, values)
    axis.set_xticks(xs)
    axis.set_xticklabels(
        [_label(u, targets) for u in uses], rotation=20, ha="right", fontsize="small"
    )
    axis.set_ylabel("bytes on the device")
    shown = f"usable {show_bytes(device.usable_bytes)}"
    axis.set_title(f"each phase under the plan ({shown})" if result.feasible else result.reason)
    axis.legend(fontsize="small")
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, dpi=100, format=path.suffix[1:].lower() or "png")
    plt.close(fig)
    write_bytes_atomically(path, image.getvalue())
