"""The one fitting core: calibrate, its findings and evidence margins, the runtime's estimators
and ``dslc infer`` all fit through it. No sympy, no numpy: exact rational arithmetic
(``fractions.Fraction``), so the same records give the same fit bit for bit.

- ``points``: ``Point`` (a size: the workload's params) and ``point_key``.
- ``samples``: the one definition of a stage sample taken from a record (``stage_sample``:
  count, memory above baseline (``WarmupRecord.above_baseline``), steady time per iteration)
  and a phase's layout.
- ``exact``: rows, rational rank, estimability (``estimable``), the exact fit through the
  independent sizes (``fit_rows``, ``basic_solution``), exact (weighted) least squares.
- ``integer``: the subset search's least squares, fraction-free (Bareiss): the same exact answer.
- ``nonnegative``: weighted non-negative least squares (``nonnegative_fit``).
- ``search``: bounded subset search over candidate term sets (``subset_search``) and held-out
  judgement (``leave_one_out``, ``held_out_error``).
- ``noise``: the one noise and tolerance model, one value per physical constant, and the one
  tolerance rule (``tolerance``) under a caller's ``Tolerance`` policy.
- ``time_plane``: per-iteration time at the target with its spread (``fit_time``).
- ``model``: the one modeler interface (``Modeler``: a stage, a ``Policy`` and its ``Sample``s in,
  one model out; ``Sample`` the one sample type, of calibrate's checks, the estimates and ``dslc
  infer``) and a calibration's ``FitCache``, which fits each (stage, policy, samples) once.
- the enums for phase kinds, quantities, methods, finding kinds and margin sources are
  ``runtime.kinds`` (records use them too), re-exported here.
"""

from __future__ import annotations

from artifact.point import Point, PointKey, point_key
from runtime.estimate.fit.exact import (
    Row,
    basic_solution,
    estimable,
    fit_rows,
    independent_rows,
    least_squares,
    predict,
    rank,
    row,
    weighted_least_squares_at,
)
from runtime.estimate.fit.noise import (
    ALLOCATOR_SLACK,
    CLOCK_JITTER_S,
    MODEL_ERROR,
    ONE_SPREAD,
    RESIDUAL,
    Tolerance,
    Z,
    distance,
    memory_slack,
    relative_noise,
    tolerance,
)
from runtime.estimate.fit.nonnegative import NonNegativeFit, nonnegative_fit
from runtime.estimate.fit.samples import Layout, StageSample, phase_layout, stage_sample
from runtime.estimate.fit.search import (
    Rejection,
    SubsetFit,
    TermSearch,
    candidate_sets,
    held_out_error,
    leave_one_out,
    subset_search,
)
from runtime.estimate.fit.time_plane import SizeTimes, TimeFit, fit_time, predicted_spread
from runtime.kinds import FindingKind, MarginSource, Method, PhaseKind, Quantity

__all__ = [
    "ALLOCATOR_SLACK",
    "CLOCK_JITTER_S",
    "MODEL_ERROR",
    "ONE_SPREAD",
    "RESIDUAL",
    "FindingKind",
    "Layout",
    "MarginSource",
    "Method",
    "NonNegativeFit",
    "PhaseKind",
    "Point",
    "PointKey",
    "Quantity",
    "Rejection",
    "Row",
    "SizeTimes",
    "StageSample",
    "SubsetFit",
    "TermSearch",
    "TimeFit",
    "Tolerance",
    "Z",
    "basic_solution",
    "candidate_sets",
    "distance",
    "estimable",
    "fit_rows",
    "fit_time",
    "held_out_error",
    "independent_rows",
    "least_squares",
    "leave_one_out",
    "memory_slack",
    "nonnegative_fit",
    "phase_layout",
    "point_key",
    "predict",
    "predicted_spread",
    "rank",
    "relative_noise",
    "row",
    "stage_sample",
    "subset_search",
    "tolerance",
    "weighted_least_squares_at",
]
