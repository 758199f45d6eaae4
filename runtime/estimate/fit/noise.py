"""The one noise and tolerance model: how far a measured value may be off a fit by the measurement
alone. One value per physical constant, each with the measurement behind it.

Memory is counted, time is sampled:

- memory: the exact CPU backend counts every live byte, so nothing (``memory_slack``: 0; a float
  fit of integers needed half a byte of rounding, the exact ``Fraction`` fits need none); the CUDA
  caching allocator rounds each block to 512 B, so ``ALLOCATOR_SLACK``;
- time: each size keeps one sample per run (``samples.stage_sample``); the samples' relative spread
  pooled over the sizes measured more than once (``relative_noise``: ``1.4826 x MAD / median``,
  made median-unbiased for small counts by ``SMALL_SAMPLE``), at least ``NOISE_FLOOR``,
  ``DEFAULT_NOISE`` when no size has two samples; a median of ``n`` samples has the standard error
  ``MEDIAN_SE x noise x median / sqrt(n)``, never under the clock's ``CLOCK_JITTER_S`` where
  fewer than ``REPLICATED`` runs could show the jitter themselves;
- a plane is a *local* model: time per pixel drifts with size (caches, kernel choice), by
  ``MODEL_ERROR`` (one sigma) of a size's time per e-fold of ``distance`` between its terms and
  the point it is read at;
- a residual is more than noise beyond ``Z`` standard deviations of its combined uncertainty:
  one rule (``tolerance``), its policy (a ``Tolerance``) passed by the caller as the modeler's
  are: calibrate's checks (``RESIDUAL``) combine each size's own, carried and model error, the
  clock's jitter inside its own; ``dslc infer``'s check of its `time ~` (``ONE_SPREAD``) has only
  the base's run-to-run spread, so it adds the clock's jitter and takes at least ``TIME_FLOOR``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from fractions import Fraction

from attrs import frozen

#: Bytes a fit may miss by on a caching allocator: each block is rounded up to 512 B, and a phase's
#: peak holds up to about a hundred blocks beyond those its terms describe.
ALLOCATOR_SLACK = float(64 << 10)
#: Relative noise assumed when no size was measured twice.
DEFAULT_NOISE = 0.05
#: The least relative noise: clocks, caches and schedulers jitter even when samples agree.
NOISE_FLOOR = 0.005
#: Seconds a per-iteration sample may be off whatever its size: the timer, dispatch and a shared
#: core's scheduling (a one-shot stage of a few milliseconds is mostly that).
CLOCK_JITTER_S = 0.002
#: The fewest runs of a size whose own spread stands for the clock's jitter: every run's sample
#: holds the timer's, the dispatch's and the scheduler's share, so a median of this many runs
#: (their robust spread pooled over the sizes) shows it, and ``CLOCK_JITTER_S`` is a prior only
#: for a size timed in fewer. A median of three also outlives one burst.
REPLICATED = 3
#: One sigma of how far a plane may be off a size's time, relative to it, per e-fold of distance
#: between the size's time terms and where the plane is read. Measured on the CPU (bench/README.md,
#: "Time near the target", ``bench/drift.py``): the Wan VAE's decode time per pixel rose 16 % and
#: 35 % from 64 to 128 px, which is 1.4 e-folds of area, in two runs: 11-25 % an e-fold, part of
#: which a plane's constant takes up. So 10 % is one sigma, and ``Z`` sigma (30 % an e-fold) covers
#: the largest drift measured. (The findings once used 35 % as if it were per e-fold: it was the
#: rise over 1.4 e-folds.)
MODEL_ERROR = 0.1
#: Standard deviations a time residual must exceed to be more than noise (about 1 in 370 for
#: normal noise, per size and stage).
Z = 3.0
#: The least relative tolerance of a time checked against one spread (``ONE_SPREAD``): a
#: size measured once on a shared machine moves by this much whatever the base's spread.
TIME_FLOOR = 0.2
#: A robust standard deviation from the median absolute deviation (normal samples).
MAD_TO_SD = 1.4826
#: ``1.4826 x MAD`` of a few samples is far below the standard deviation: of 3 normal samples its
#: median is 0.54 sigma (the middle sample's own deviation, 0, is one of the 3). These factors
#: make it median-unbiased for n samples (pooling over sizes takes a median): 1 / the median of
#: ``1.4826 x MAD`` over simulated normal samples (tests/runtime/estimate/test_time_fit.py
#: checks them by simulation); past 16 samples ``1 + 1.2 / n``.
SMALL_SAMPLE: tuple[float, ...] = (
    1.0, 1.0, 1.414, 1.871, 1.487, 1.338, 1.264, 1.209, 1.178, 1.150,
    1.135, 1.120, 1.107, 1.097, 1.090, 1.082, 1.077,
)  # fmt: skip
#: The standard error of a median is about this times the mean's (normal samples).
MEDIAN_SE = 1.2533


def memory_slack(backend: str) -> float:
    """Bytes of residual the memory backend can produce by itself: 0 where it counts exactly."""
    return 0.0 if backend.endswith("live-tensors") else ALLOCATOR_SLACK


def small_sample(n: int) -> float:
    """The factor that makes ``1.4826 x MAD`` of ``n`` normal samples median-unbiased."""
    return SMALL_SAMPLE[n] if n < len(SMALL_SAMPLE) else 1 + 1.2 / n


def sample_noise(seconds: Sequence[float]) -> float | None:
    """One size's relative standard deviation from its samples; None under two samples."""
    if len(seconds) < 2:
        return None
    middle = statistics.median(seconds)
    if middle <= 0:
        return None
    mad = statistics.median(abs(s - middle) for s in seconds)
    return MAD_TO_SD * small_sample(len(seconds)) * mad / middle


def relative_noise(sizes: Sequence[Sequence[float]]) -> float:
    """The samples' pooled relative standard deviation: the median over the sizes measured more
    than once, at least ``NOISE_FLOOR``; ``DEFAULT_NOISE`` when no size was."""
    spreads = [s for s in (sample_noise(seconds) for seconds in sizes) if s is not None]
    if not spreads:
        return DEFAULT_NOISE
    return max(NOISE_FLOOR, statistics.median(spreads))


def distance(terms: Sequence[Fraction], target: Sequence[Fraction]) -> float:
    """E-folds between a size's time terms and the target's: the largest ``|ln(target / size)|``
    over the terms above 0 at both (0 when none is: nothing says how far)."""
    return max(
        (abs(log_ratio(t, x)) for x, t in zip(terms, target) if x > 0 and t > 0), default=0.0
    )


def log_ratio(top: Fraction | float, bottom: Fraction | float) -> float:
    """``ln(top / bottom)`` of two positive numbers; a ratio past a float either way (a term in
    ``height ** 120`` at a large target) is a large number of e-folds read from its exact parts,
    never an ``OverflowError`` nor the log of a ratio rounded to 0 (``math.log`` takes an int of
    any size)."""
    ratio = Fraction(top) / Fraction(bottom)
    try:
        rounded = float(ratio)
    except OverflowError:
        rounded = math.inf
    if 0 < rounded < math.inf:
        return math.log(rounded)
    return math.log(ratio.numerator) - math.log(ratio.denominator)


def median_error(median: float, count: int, noise: float) -> float:
    """The standard error of a median of ``count`` samples at relative ``noise``, with the clock's
    jitter as a prior where fewer than ``REPLICATED`` runs cannot show it (``noise`` does from
    there on: the jitter lands in the runs it measures)."""
    relative = MEDIAN_SE * noise * abs(median) / math.sqrt(max(count, 1))
    return relative if count >= REPLICATED else math.hypot(relative, CLOCK_JITTER_S)


def fit_weight(median: float, count: int, noise: float, far: float = 0.0) -> Fraction:
    """``1 / (se² + model²)`` of a median of ``count`` samples around ``median``, ``far`` e-folds
    from the target (a floor keeps it finite). The clock's jitter is not in ``se`` here: it is
    the same at every size, so it would only flatten the weights, not move the plane."""
    scale = max(median, 1e-9)
    se = MEDIAN_SE * noise * scale / math.sqrt(max(count, 1))
    model = MODEL_ERROR * far * scale
    return Fraction(1 / (se * se + model * model))


@frozen
class Tolerance:
    """How a caller judges a residual (a policy, as the modeler's are): ``z`` sigma of the combined
    uncertainty, the model error ``model_error`` (one sigma a size's value, an e-fold) among it, at
    least ``floor`` of the value, plus ``jitter`` seconds where the sigma leaves the clock out."""

    z: float = Z
    model_error: float = MODEL_ERROR
    floor: float = 0.0
    jitter: float = 0.0


#: Calibrate's checks: each size's ``se`` already holds the clock's jitter (``median_error``).
RESIDUAL = Tolerance()
#: ``dslc infer``'s time check: a time measured once against the base's run-to-run spread alone.
ONE_SPREAD = Tolerance(floor=TIME_FLOOR, jitter=CLOCK_JITTER_S)


def tolerance(
    policy: Tolerance, value: float, se: float = 0.0, carried: float = 0.0, far: float = 0.0
) -> float:
    """The one rule of how far ``value`` may be off a fit by the measurement alone: its own
    standard error ``se``, the fit's ``carried`` to it and the model error ``far`` e-folds away
    combined, ``policy.z`` of that sigma (at least ``policy.floor`` of the value), plus the clock's
    ``policy.jitter``."""
    model = policy.model_error * far * abs(value)
    sigma = math.sqrt(se * se + carried * carried + model**2)
    return policy.jitter + max(policy.z * sigma, policy.floor * value)
