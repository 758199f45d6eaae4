"""The spread a time residual is judged against (calibration.probes.time_evidence), on hand-built
fits shaped as the seeded mistake wan-time-no-cfg's: two sizes along the tokens fitted, and a
small size 2.7x as far below them as they are apart, off the fit by +99 % (the CFG doubling the
formula lacks). A slow run above a fitted size's median cannot move it, so it no longer hides the
residual; a fitted size whose median is itself slow (two runs of three) still does."""

from __future__ import annotations

import statistics
from fractions import Fraction

import pytest

from calibration.probes.residuals import SizePoint, StageFit
from calibration.probes.time_evidence import median_spread, residual_spread, unclean
from runtime.estimate.fit.exact import fit_rows, predict, row
from runtime.kinds import Quantity

MS = 1e-3


def fit_of(runs: dict[int, tuple[float, ...]], off: int) -> StageFit:
    """Sizes by tokens with their runs (ms); the fit through all but ``off``, largest first."""
    tokens = sorted(runs, reverse=True)
    values = {t: statistics.median(runs[t]) * MS for t in tokens}
    chosen = [t for t in tokens if t != off]
    coefficients, _ = fit_rows(
        [row((Fraction(t),)) for t in chosen], [Fraction(values[t]) for t in chosen]
    )
    points = tuple(
        SizePoint(
            {"tokens": t},
            (Fraction(t),),
            values[t],
            float(predict(coefficients, row((Fraction(t),)))) if t == off else None,
            tuple(r * MS for r in runs[t]),
            0.1 * MS if t == off else 0.0,  # a tolerance the residual is far beyond
        )
        for t in tokens
    )
    indices = tuple(tokens.index(t) for t in chosen)
    return StageFit("DenoisingStage", Quantity.TIME, points, indices, 0.0, 0.0, ())


def test_one_slow_run_of_a_fitted_size_no_longer_hides_a_clean_residual():
    fit = fit_of({3072: (4.2, 4.3, 4.2), 2304: (4.0, 4.1, 7.1), 1024: (7.8, 8.0, 8.4)}, 1024)
    (index,) = fit.off
    residual = fit.points[index].residual
    assert residual / fit.points[index].predicted > 0.99  # the CFG doubling, +99 %
    assert residual_spread(fit, index) < residual / 10  # the range once carried 9.0 ms of it
    assert unclean(fit) is None


def test_a_fitted_size_whose_runs_truly_disagree_still_leaves_it_unknown():
    fit = fit_of({3072: (4.2, 4.3, 4.2), 2304: (4.0, 7.0, 7.1), 1024: (7.8, 8.0, 8.4)}, 1024)
    (index,) = fit.off
    assert median_spread(fit.points[fit.chosen[1]]) == pytest.approx(3.0 * MS)
    assert residual_spread(fit, index) > abs(fit.points[index].residual)
    assert "the runs spread" in (unclean(fit) or "")


def test_a_size_below_the_fit_whose_own_fastest_run_is_far_below_is_unknown_too():
    fit = fit_of({3072: (4.2, 4.3, 4.2), 2304: (4.0, 4.1, 4.0), 1024: (0.5, 3.5, 3.6)}, 1024)
    (index,) = fit.off
    assert fit.points[index].residual < 0
    assert median_spread(fit.points[index]) > abs(fit.points[index].residual)
    assert unclean(fit) is not None


def test_the_median_spread_is_its_height_above_the_fastest_run():
    point = SizePoint({}, (), 5.0, None, (9.0, 4.0, 5.0))
    assert median_spread(point) == 1.0  # the 9.0 above the median cannot have moved it
    assert median_spread(SizePoint({}, (), 5.0, None)) == 0.0  # memory: no runs
