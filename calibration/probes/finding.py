"""One finding (a disagreement between the measured sizes and a stage's formula, with its
consequence at the target), what makes one actionable, and how findings are ranked; the kinds are
described in ``calibration.probes.findings``."""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen

from artifact.point import Point
from calibration.probes.residuals import SizePoint, StageFit
from runtime.kinds import FindingKind, Quantity

#: A residual is material when its risk at the target is at least this share of the stage's peak
#: (memory: half a percent, a tenth of the error a first-draft formula reaches on families never
#: seen) or of the request's time (the time goal, calibration.probes.time_probe.TIME_TOLERANCE).
MATERIAL: Mapping[str, float] = {Quantity.MEMORY: 0.005, Quantity.TIME: 0.05}


#: A memory residual worth less than this share of the stage's peak at the target is not reported
#: (a scheduler's step arrays, a few bytes); its risk is still added to the bound.
DETAIL = 1e-4


#: Finding kinds that ask for a change before the calibration can be trusted.
ACTIONABLE = frozenset(
    {
        FindingKind.FORMULA_MISMATCH,
        FindingKind.ITERATION_MISMATCH,
        FindingKind.STAGE_NOT_MEASURED,
        FindingKind.NOT_ESTIMABLE,
        FindingKind.BOUND_UNDER,
    }
)


#: Finding kinds that are notes: nothing to act on (a residual's risk is in the bound, a time too
#: noisy to judge, a target far along a param the budget could not measure: the evidence margin
#: pads its reach, and the note names what no size saw), so they say what they mean rather than a
#: next step, and --quiet drops them.
NOTES = frozenset({FindingKind.RESIDUAL, FindingKind.TIME_UNKNOWN, FindingKind.FAR_AXIS})


@frozen
class Finding:
    """One disagreement between the measurements and a stage's formula, with its consequence."""

    kind: FindingKind  # see the module docstring
    stage: str
    quantity: Quantity
    message: str
    points: tuple[SizePoint, ...]
    direction: str | None = None  # what the unexplained part grows with
    out_of_regime: tuple[Point, ...] = ()  # sizes to leave out of the estimate
    risk: float = 0.0  # bytes or seconds the formula may miss by at the target
    share: float = 0.0  # risk / the stage's peak (memory) or the request's time (time)
    next_step: str = ""

    @property
    def actionable(self) -> bool:
        """Whether it asks the user to change something (the formula, the probe) before trusting
        the calibration."""
        return self.kind in ACTIONABLE


@frozen
class Checked:
    """The findings, most consequential first, and every stage's fit (the evidence for margins)."""

    findings: tuple[Finding, ...]
    fits: tuple[StageFit, ...]
    quiet: tuple[Finding, ...] = ()  # residuals under DETAIL: not reported, their risk still added

    def fits_of(self, stage: str, quantity: Quantity) -> tuple[StageFit, ...]:
        """The stage's fits of ``quantity`` (memory: one a phase, the stage's own first)."""
        return tuple(f for f in self.fits if f.stage == stage and f.quantity == quantity)


def rank(finding: Finding) -> tuple[bool, float, str, str]:
    """How findings are ordered: those to act on first, then by their share at the target."""
    return (not finding.actionable, -finding.share, finding.stage, finding.quantity)
