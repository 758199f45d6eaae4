"""Whether a stage's time residuals are clean evidence of a wrong formula, or too noisy to say.

A time ``formula-mismatch`` must rest on replicated requests: every size it rests on (each size
off the fit and each size the fit passes through) timed in at least ``MIN_RUNS`` runs, whose
median is what is fitted, and each off size's residual larger than the spread its runs leave it:
the range of its own runs plus the ranges the fit carries to it from the sizes it passes through
(how far its predicted value moves with each of theirs). On a loaded machine even the thread's
CPU time moves from run to run (caches and memory bandwidth shared with a busy neighbour, the
core's frequency): a residual within that spread could come out the other way in the next
calibration, so the findings make it a ``time-unknown`` note, never an alarm.
"""

from __future__ import annotations

from fractions import Fraction

from calibration.probes.residuals import SizePoint, StageFit
from runtime.estimate.fit.exact import fit_rows, predict, row

#: The fewest runs of a size a time finding may rest on: a median of three outlives one burst.
MIN_RUNS = 3


def _range(point: SizePoint) -> float:
    return max(point.samples) - min(point.samples) if point.samples else 0.0


def residual_spread(fit: StageFit, index: int) -> float:
    """How far the residual at size ``index`` moves with the runs: its own runs' range plus each
    fitted size's range times how much the fit's value at ``index`` moves with that size's."""
    points = fit.points
    rows = [row(p.terms) for p in points]
    chosen = [rows[k] for k in fit.chosen]
    spread = _range(points[index])
    for j, k in enumerate(fit.chosen):
        unit = [Fraction(int(i == j)) for i in range(len(chosen))]
        coefficients, _ = fit_rows(chosen, unit)
        spread += abs(float(predict(coefficients, rows[index]))) * _range(points[k])
    return spread


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
