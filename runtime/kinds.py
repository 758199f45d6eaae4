"""The kinds every estimator, check and report compares: enums, never bare strings.

Each is a ``StrEnum``, so a member equals its text (records and JSON documents keep the text) and
prints as it.
"""

from __future__ import annotations

from enum import StrEnum


class PhaseKind(StrEnum):
    """What a recorded phase measured (``runtime.record.Phase.kind``)."""

    STAGE = "stage"
    SETUP = "setup"
    COMPONENT = "component"
    PREFETCH = "prefetch"  # a caller's window of onloading ahead: its components present, not run


class Quantity(StrEnum):
    """What a fit or a finding is about."""

    MEMORY = "memory"
    TIME = "time"
    ITERATIONS = "iterations"


class Method(StrEnum):
    """How an estimate was obtained (``runtime.estimate.results.METHODS``)."""

    MEASUREMENT = "measurement"
    FIT = "fit"
    SCALED = "scaled"
    NONE = "none"


class FindingKind(StrEnum):
    """What a check of the measured sizes against the formulas found (docs/estimators.md)."""

    FORMULA_MISMATCH = "formula-mismatch"
    PROBE_REGIME = "probe-regime"
    UNCONFIRMED = "unconfirmed"
    RESIDUAL = "residual"
    ITERATION_MISMATCH = "iteration-mismatch"
    STAGE_NOT_MEASURED = "stage-not-measured"
    NOT_ESTIMABLE = "not-estimable"
    TIME_UNKNOWN = "time-unknown"  # a time residual too noisy to judge: a note, never an alarm
    FAR_AXIS = "far-axis"  # the target far past every measured size along a param, unmeasured
    BOUND_UNDER = "bound-under"  # a bound under the peak --verify measured: the growth it lacks


class MarginSource(StrEnum):
    """Where a stage's margin came from."""

    EVIDENCE = "evidence"  # the sizes confirm the stage's terms
    RISK = "risk"  # the evidence's margin, and an open finding's quantified risk added to the bound
    FIXED = "fixed"


#: The margins a stage earns from its measured sizes (the others are the fixed one).
EARNED = frozenset({MarginSource.EVIDENCE, MarginSource.RISK})


class FitRule(StrEnum):
    """How a modeler's policy selects and weighs the sizes (``runtime.estimate.fit.model``)."""

    EXACT = "exact"  # through the independent sizes nearest the target; the others checked
    PLANE = "plane"  # weighted least squares over every size, read at the target with a spread
    PEAK = "peak"  # largest peak a size, nearest sizes; a negligible negative slope left out
    LEVEL = "level"  # PEAK for a weights level: any negative slope left out, the fit over each size
    SEARCH = "search"  # the fewest candidate terms that give every size its tolerance (infer)
    NONNEGATIVE = "nonnegative"  # one term set, non-negative slopes, weighted by tolerance (infer)
