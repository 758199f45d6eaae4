"""Do the measured sizes agree with the formulas? ``formula-mismatch``, ``probe-regime`` findings.

For each stage and quantity (peak memory above the request's baseline; time per iteration), the
sizes nearest the target that add a direction are fitted exactly (``constant + Σ slope × term``) and
every other measured size is predicted from that fit. A size predicted within the tolerance
confirms the formula. One that is not:

- *probe-regime*: only sizes smaller than every size that fits miss, and at least one size beside
  those the fit passes through confirms it -- the small probes sat outside the formula's steady
  regime (a video VAE decoding its first latent frames differently); their records are left out of
  the estimate.
- *unconfirmed*: only the smallest size misses and nothing else confirms the fit yet; the loop then
  runs a larger probe (``calibration.run``) and checks again.
- *formula-mismatch*: anything else -- two or more sizes miss with none confirming, a size larger
  than a confirming one misses, or two sizes with the same terms measured differently: the declared
  terms do not explain the measurements; the finding names the direction (steps, a probe axis) the
  unexplained part follows.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from fractions import Fraction

from attrs import frozen

from artifact.spelling import point_text
from calibration.probes.policy import QUANTITIES, fit_rows, predict, work
from runtime import Pipeline
from runtime.estimate.planes import row
from runtime.record import WarmupRecord

#: Relative misses tolerated, of the largest value of the quantity among the sizes: memory is
#: counted exactly (CPU) or nearly (CUDA caching allocator); time is noisy on a shared machine.
TOLERANCE: Mapping[str, float] = {"memory": 0.03, "time": 0.35}
#: Absolute slack: allocator rounding and small framework buffers (4 KiB); timer and dispatch
#: jitter of a shared CPU (3 ms per iteration).
SLACK: Mapping[str, float] = {"memory": float(4 << 10), "time": 0.003}
#: Finding kinds that ask for a change before the calibration can be trusted.
ACTIONABLE = frozenset({"formula-mismatch"})


@frozen
class SizePoint:
    """One measured size of a stage's quantity: its params, terms, value and the fit's value."""

    params: Mapping[str, int | bool]
    terms: tuple[Fraction, ...]
    value: float
    predicted: float | None  # None for the sizes the fit passes through


@frozen
class Finding:
    """One disagreement between the measurements and a stage's formula."""

    kind: str  # "formula-mismatch", "probe-regime" or "unconfirmed"
    stage: str
    quantity: str  # "memory" or "time"
    message: str
    points: tuple[SizePoint, ...]
    direction: str | None = None  # what the unexplained part grows with
    out_of_regime: tuple[Mapping[str, int | bool], ...] = ()  # sizes to leave out of the estimate

    @property
    def actionable(self) -> bool:
        """Whether it asks the user to change something (the formula, the probe) before trusting
        the calibration."""
        return self.kind in ACTIONABLE


def _stage_value(record: WarmupRecord, stage: str, quantity: str, iterations: int) -> float | None:
    """Peak bytes above the request's baseline, or seconds per iteration, of ``stage``."""
    if quantity == "memory":
        peaks = [p.peak_allocated for p in record.phases if p.kind == "stage" and p.name == stage]
        return float(max(peaks) - record.baseline_allocated) if peaks else None
    steps = sorted((i for i in record.iterations if i.stage == stage), key=lambda i: i.index)
    if len(steps) > 1:
        return statistics.median(i.duration_s for i in steps[1:])
    seconds = record.stage_durations.get(stage)
    if seconds is None or iterations <= 0:
        return None
    return seconds / iterations


def sizes(
    pipeline: Pipeline, records: Sequence[WarmupRecord], stage: str, quantity: str
) -> list[tuple[dict[str, int | bool], tuple[Fraction, ...], float]]:
    """One value per measured size (memory: the largest of its repeats; time: the median)."""
    terms_of = QUANTITIES[quantity]
    by_size: dict[tuple[tuple[str, int | bool], ...], list[float]] = {}
    # The first request pays one-time costs (lazy initialisation, caches): neither its time nor its
    # peak says what the formula does (the loop re-runs its size later).
    later = records[1:] if len(records) > 2 else records
    for record in later:
        if not record.ok:
            continue
        params = dict(record.params)
        iterations = int(pipeline.evaluate(**params)[stage].iterations)
        value = _stage_value(record, stage, quantity, iterations)
        if value is not None:
            by_size.setdefault(tuple(params.items()), []).append(value)
    out = []
    for key, values in by_size.items():
        params = dict(key)
        value = max(values) if quantity == "memory" else statistics.median(values)
        out.append((params, terms_of(pipeline, stage, params), value))
    return out


def directions(pipeline: Pipeline) -> dict[str, tuple[str, ...]]:
    """Named growth directions: each probe axis group (``height*width``), then other int params."""
    out: dict[str, tuple[str, ...]] = {}
    grouped: set[str] = set()
    for group in getattr(pipeline, "probe_axes", ()):
        out["*".join(group)] = tuple(group)
        grouped.update(group)
    for name, value in pipeline.default_workload.items():
        if name not in grouped and not isinstance(value, bool):
            out[name] = (name,)
    return out


def _direction(
    pipeline: Pipeline, points: Sequence[SizePoint], off: Sequence[int], chosen: Sequence[int]
) -> str | None:
    """What the unexplained part follows: the direction in which the missed sizes differ most from
    the fitted ones, and whether the measurements grow faster or slower than the declared terms."""
    best: tuple[float, str] | None = None
    for name, group in directions(pipeline).items():

        def at(i: int, group: tuple[str, ...] = group) -> float:
            return float(math.prod(int(points[i].params[g]) for g in group))

        fitted = [at(i) for i in chosen]
        spread = max(abs(math.log(at(i) / f)) for i in off for f in fitted if at(i) > 0 and f > 0)
        if spread > 0 and (best is None or spread > best[0]):
            best = (spread, name)
    if best is None:
        return None
    same_terms = all(points[i].terms in {points[c].terms for c in chosen} for i in off)
    if same_terms:
        return f"{best[1]}, which the declared terms leave out"
    residual = statistics.fmean(points[i].value - (points[i].predicted or 0.0) for i in off)
    below = all(sum(points[i].terms) <= min(sum(points[c].terms) for c in chosen) for i in off)
    faster = (residual > 0) == below
    return f"{best[1]}, growing {'faster' if faster else 'slower'} than the declared terms"


def _show(params: Mapping[str, int | bool]) -> str:
    return point_text(params)


def check_stage(
    pipeline: Pipeline, records: Sequence[WarmupRecord], stage: str, quantity: str
) -> Finding | None:
    """The finding for one stage's quantity, or None when the sizes agree (or cannot be tested)."""
    measured = sizes(pipeline, records, stage, quantity)
    if len(measured) < 2:
        return None
    measured.sort(key=lambda s: work(pipeline, s[0]), reverse=True)  # the largest first
    rows = [row(terms) for _, terms, _ in measured]
    coefficients, chosen = fit_rows(rows, [Fraction(v) for _, _, v in measured])
    scale = max(abs(v) for _, _, v in measured)
    slack = TOLERANCE[quantity] * scale + SLACK[quantity]
    points, off = [], []
    for i, (params, terms, value) in enumerate(measured):
        predicted = None if i in chosen else float(predict(coefficients, rows[i]))
        points.append(SizePoint(params, terms, value, predicted))
        if predicted is not None and abs(value - predicted) > slack:
            off.append(i)
    if not off:
        return None
    chosen_rows = {rows[i] for i in chosen}
    confirming = [i for i in range(len(measured)) if i not in chosen and i not in off]
    larger = [work(pipeline, measured[i][0]) for i in (*chosen, *confirming)]
    below = all(
        rows[i] not in chosen_rows and work(pipeline, measured[i][0]) < min(larger) for i in off
    )
    regime = below and bool(confirming)
    unconfirmed = below and not confirming and len(off) == 1
    shown = "; ".join(
        f"{_show(p.params)}: {p.value:.4g}"
        + ("" if p.predicted is None else f" (fit {p.predicted:.4g})")
        for p in points
    )
    unit = "B above baseline" if quantity == "memory" else "s per iteration"
    if regime:
        return Finding(
            "probe-regime",
            stage,
            quantity,
            f"{stage} {quantity}: the smallest size measured outside the formula's steady regime "
            f"(its {unit} is off the fit that the larger sizes confirm); left out of the estimate; "
            f"probe at larger sizes. Sizes: {shown}",
            tuple(points),
            out_of_regime=tuple(measured[i][0] for i in off),
        )
    if unconfirmed:
        return Finding(
            "unconfirmed",
            stage,
            quantity,
            f"{stage} {quantity}: the smallest size is off the fit through the larger ones; "
            "a larger "
            f"probe decides between a probe outside the steady regime and a wrong formula. "
            f"Sizes: {shown}",
            tuple(points),
            out_of_regime=tuple(measured[i][0] for i in off),
        )
    direction = _direction(pipeline, points, off, chosen)
    return Finding(
        "formula-mismatch",
        stage,
        quantity,
        f"{stage} {quantity}: the declared terms do not explain the measured sizes (left over: "
        + ", ".join(f"{points[i].value - (points[i].predicted or 0.0):+.4g} {unit}" for i in off)
        + f" beyond a tolerance of {slack:.4g}); the unexplained part follows "
        f"{direction or 'an undeclared term'}. "
        f"Sizes: {shown}",
        tuple(points),
        direction,
    )


def check(pipeline: Pipeline, records: Sequence[WarmupRecord]) -> tuple[Finding, ...]:
    """Every stage's memory and time, checked."""
    out = []
    for stage in pipeline.stages:
        for quantity in QUANTITIES:
            finding = check_stage(pipeline, records, stage, quantity)
            if finding is not None:
                out.append(finding)
    return tuple(out)
