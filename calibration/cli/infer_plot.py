"""`dslc infer --plot FILE.png`: per stage, the memory measured at every size and each fitted
term's part of it, stacked, so a term that carries the stage shows beside one that barely moves
it (Agg; one panel per stage)."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from artifact.atomic import write_bytes_atomically
from artifact.spelling import point_text
from calibration.infer.analyse import StageProposal

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: The most sizes drawn a panel (a ladder holds 48 at most, with its switched sizes 96).
MAX_DRAWN = 128


def _panel(axis: Axes, proposal: StageProposal) -> None:
    """The sizes by measured memory, each term's fitted part stacked under the measured point."""
    from calibration.cli.plot import bytes_axis

    samples = sorted(proposal.memory_samples, key=lambda s: s.value)[:MAX_DRAWN]
    xs = list(range(len(samples)))
    fit = proposal.memory
    bottom = [fit.constant if fit.terms else 0.0 for _ in samples]
    tops: list[float | None] = [abs(v) for v in bottom]
    if fit.terms:
        axis.bar(xs, bottom, 0.7, label=f"constant {fit.constant:.4g} B", color="lightgrey")
        for term, slope in zip(fit.terms, fit.slopes, strict=True):
            part = [slope * float(term.at(s.point)) for s in samples]
            axis.bar(xs, part, 0.7, bottom=bottom, label=f"{slope:.4g} B x {term.text}")
            bottom = [b + p for b, p in zip(bottom, part, strict=True)]
        tops += bottom
    for held, marker, name in ((False, "o", "measured"), (True, "x", "measured, held out")):
        shown = [(x, s.value) for x, s in zip(xs, samples, strict=True) if s.held_out == held]
        if shown:
            axis.scatter(*zip(*shown), marker=marker, color="black", zorder=3, label=name)
    bytes_axis(axis, [*tops, *(s.value for s in samples)])
    axis.set_xticks(xs)
    axis.set_xticklabels([point_text(s.point) for s in samples], rotation=60, ha="right")
    axis.tick_params(axis="x", labelsize=5)
    axis.set_title(f"{proposal.plan.name}: memory ~ " + (_terms(proposal) or "(no fit)"))
    axis.legend(fontsize="x-small")


def _terms(proposal: StageProposal) -> str:
    terms = proposal.memory.terms
    return "" if terms is None else "[" + ", ".join(m.text for m in terms) + "]"


def plot_inference(proposals: Sequence[StageProposal], path: Path) -> None:
    """One panel a stage, two a row: the measured sizes and the fitted terms' parts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = max(1, math.ceil(len(proposals) / 2))
    columns = 2 if len(proposals) > 1 else 1
    fig, axes = plt.subplots(rows, columns, figsize=(8 * columns, 5 * rows), squeeze=False)
    flat = [a for row in axes for a in row]
    for axis, proposal in zip(flat, proposals):
        _panel(axis, proposal)
    for axis in flat[len(proposals) :]:
        fig.delaxes(axis)  # an odd stage count leaves one cell empty
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, dpi=100, format=path.suffix[1:].lower() or "png")
    plt.close(fig)
    write_bytes_atomically(path, image.getvalue())
