"""Whether a stage's time residuals are clean evidence of a wrong formula, or too noisy to say.

A time ``formula-mismatch`` must rest on replicated requests: every size it rests on (each size
off the fit and each size the fit passes through) timed in at least ``MIN_RUNS`` runs, whose
median is what is fitted, and each off size's residual larger than the spread its runs leave it.
On a loaded machine even the thread's CPU time moves from run to run (caches and memory bandwidth
shared with a busy neighbour, preemptions, the core's frequency): a residual within that spread
could come out the other way in the next calibration, so the findings make it a ``time-unknown``
note, never an alarm.

The spread is read from the runs the way they err. Contention only ever adds CPU time (a
neighbour's burst, a preemption's cold cache; no run is faster than the work), so a slow run
above a size's median cannot move it: what can is how far the median sits above the fastest run
(``median_spread``), 0 when a majority agrees on the fast value, the whole gap when the runs
truly disagree or most of them are slow. The sizes' runs are separate requests minutes apart, so
their errors are independent and combine as such: the residual's spread is the root-sum-square
of its own and of each fitted size's spread times how far the fit carries it there
(``residual_spread``), as the residual tolerance combines standard errors. The worst-case sum of
ranges it replaces let one slow run of one fitted size, carried 2.7x to a small size, hide a
residual its runs agreed on to 0.6 ms (bench/README.md, issue 41).
"""

from __future__ import annotations

import math
from fractions import Fraction

from calibration.probes.residuals import SizePoint, StageFit
from runtime.estimate.fit.exact import fit_rows, predict, row
from runtime.estimate.fit.noise import REPLICATED

#: The fewest runs of a size a time finding may rest on: a median of three outlives one burst.
MIN_RUNS = REPLICATED


def median_spread(point: SizePoint) -> float:
    """How far contention can have moved the size's median: its height above the fastest run."""
    return point.value - min(point.samples) if point.samples else 0.0


def residual_spread(fit: StageFit, index: int) -> float:
    """How far the residual at size ``index`` moves with the runs: the root-sum-square of its own
    ``median_spread`` and each fitted size's times how much the fit's value at ``index`` moves
    with that size's."""
    points = fit.points
    rows = [row(p.terms) for p in points]
    chosen = [rows[k] for k in fit.chosen]
    parts = [median_spread(points[index])]
    for j, k in enumerate(fit.chosen):
        unit = [Fraction(int(i == j)) for i in range(len(chosen))]
        coefficients, _ = fit_rows(chosen, unit)
        parts.append(float(predict(coefficients, rows[index])) * median_spread(points[k]))
    return math.hypot(*parts)


def unclean(fit: StageFit) -> str | None:
    """Why ``fit``'s time residuals are not clean evidence of a wrong formula (few runs, or a
    residual within the runs' spread); None when they are."""
    off = fit.off
    if not off:
        return None
    resting = sorted({*off, *fit.chosen})
    runs = min(len(fit.points[i].samples) for i in resting)
    if runs < MIN_RUNS:
        plural = "s" if runs != 1 else ""
        return f"a size it rests on was timed in {runs} run{plural}, fewer than {MIN_RUNS}"
    noisy = [i for i in off if residual_spread(fit, i) >= abs(fit.points[i].residual)]
    if noisy:
        worst = max(noisy, key=lambda i: residual_spread(fit, i) / abs(fit.points[i].residual))
        share = residual_spread(fit, worst) / abs(fit.points[worst].residual)
        return f"the runs spread {share:.2g}x as far as the residual they would show"
    return None
