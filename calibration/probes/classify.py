"""One stage's quantity off its fit, classified (``classify``): residual, probe-regime,
unconfirmed or formula-mismatch, with the risk it carries to the target and what to do; the kinds
are described in ``calibration.probes.findings``."""

from __future__ import annotations

from collections.abc import Sequence

from attrs import evolve, frozen

from artifact.point import Point
from artifact.spelling import point_text
from artifact.units import show_bytes, show_seconds
from calibration.probes.directions import (
    Explanation,
    declared_along,
    directions,
    explanations,
)
from calibration.probes.finding import MATERIAL, Finding
from calibration.probes.policy import work
from calibration.probes.residuals import SizePoint, StageFit
from calibration.probes.time_evidence import unclean
from runtime import Pipeline
from runtime.kinds import FindingKind, Quantity

#: An explaining term is credible when its fit leaves at most this share of the largest residual.
CREDIBLE = 0.25


def _risk(fit: StageFit, candidates: Sequence[Explanation]) -> float:
    """What the formula may miss by at the target (per iteration, for time): the most the fit's
    value there moves when one of its sizes is swapped for another, or when any credible
    explaining term joins the declared ones, and never less than the largest residual at a size."""
    residual = max((abs(p.residual) for p in fit.points), default=0.0)
    explained = max(
        (abs(e.change_at_target) for e in candidates if e.left_over <= CREDIBLE * residual),
        default=0.0,
    )
    return max(residual, fit.spread_at_target(), explained)


def _amount(unit: str, value: float, signed: bool = False) -> str:
    """A size's value in its unit (bytes or seconds), through the one formatter of units."""
    shown = show_bytes(value) if unit.startswith("B") else show_seconds(value)
    return f"+{shown}" if signed and value >= 0 else shown


def _shown(points: Sequence[SizePoint], unit: str) -> str:
    return (
        "; ".join(
            f"{point_text(p.params)}: {_amount(unit, p.value)}"
            + ("" if p.predicted is None else f" (fit {_amount(unit, p.predicted)})")
            for p in points
        )
        + f" ({unit.removeprefix('B ').removeprefix('s ')})"
    )


@frozen
class _Case:
    """One stage's quantity off its fit: what every finding about it says."""

    fit: StageFit
    off: tuple[int, ...]
    what: str  # "DenoisingStage memory (setup:DenoisingStage@DenoisingStage)"
    found: Explanation | None  # the best explaining term
    risk: float
    share: float
    moved: str | None = None  # the param whose alone-moving pair of sizes disagrees most
    declared: tuple[str, ...] = ()  # the named directions the declared terms already vary along

    @property
    def undeclared(self) -> list[str]:
        """The named directions no declared term varies along: the only ones a hint may add."""
        named = [n.strip() for n in (self.name or "").split(",") if n.strip()]
        return [n for n in named if n not in self.declared]

    @property
    def name(self) -> str | None:
        if self.moved is not None:
            return self.moved
        return self.found.direction if self.found is not None else None

    @property
    def unit(self) -> str:
        return "B above baseline" if self.fit.quantity == Quantity.MEMORY else "s per iteration"

    @property
    def at_risk(self) -> str:
        return _show_risk(self.fit.quantity, self.risk, self.share)

    def finding(
        self, kind: FindingKind, message: str, next_step: str, regime: bool = False
    ) -> Finding:
        points = self.fit.points
        return Finding(
            kind,
            self.fit.stage,
            self.fit.quantity,
            message,
            points,
            self.name,
            tuple(points[i].params for i in self.off) if regime else (),
            self.risk,
            self.share,
            next_step,
        )


def classify(
    pipeline: Pipeline, fit: StageFit, target: Point, scale: float, iterations: int
) -> Finding | None:
    """The finding for one stage's quantity, or None when its sizes agree with the formula.

    ``scale`` is what a share is of: the stage's peak at the target (memory) or the request's time;
    ``iterations`` the stage's at the target (time risks are per iteration until multiplied)."""
    off = fit.off
    if not off:
        return None
    candidates = explanations(pipeline, fit, target)
    risk = _risk(fit, candidates) * (iterations if fit.quantity == Quantity.TIME else 1)
    what = f"{fit.stage} {fit.quantity}"
    if fit.phase and not fit.phase.startswith("stage:"):
        what += f" ({fit.phase})"
    case = _Case(
        fit,
        off,
        what,
        candidates[0] if candidates else None,
        risk,
        risk / scale if scale > 0 else 1.0,  # nothing to compare with: count it whole
        _moved_alone(pipeline, fit),
    )
    named = [n.strip() for n in (case.name or "").split(",") if n.strip()]
    declared = tuple(n for n in named if declared_along(pipeline, fit, n, target))
    case = evolve(case, declared=declared)
    if case.share < MATERIAL[fit.quantity]:
        # time within the goal at the target is noise or a detail, not a finding
        return _residual(case) if fit.quantity == Quantity.MEMORY else None
    if fit.quantity == Quantity.TIME and (noisy := unclean(fit)) is not None:
        return _time_unknown(case, noisy)
    regime, unconfirmed = _below(pipeline, fit, off)
    if regime:
        return _regime(pipeline, case, target)
    if unconfirmed:
        return case.finding(
            FindingKind.UNCONFIRMED,
            f"{what}: the smallest size is off the fit through the larger ones "
            f"({case.at_risk}), and no size between the probe and the target is left to decide "
            "between a probe outside the steady regime and a wrong formula. Sizes: "
            f"{_shown(fit.points, case.unit)}",
            "probe larger (--probe), or declare `probe AXIS >= N` if the formula is right",
            regime=True,
        )
    return _mismatch(case)


#: A direction is named beside the worst one when its pairs disagree at least this much of it.
ALSO = 0.25


def _moved_alone(pipeline: Pipeline, fit: StageFit) -> str | None:
    """The params whose pairs of sizes that differ in them alone disagree with the fit, the worst
    first (each as its probe-axis group): the residuals of such a pair differ by what the formula
    gets wrong along it -- the most direct evidence, which coverage plans for."""
    gaps: dict[str, float] = {}
    points = fit.points
    group_of = {param: n for n, group in directions(pipeline).items() for param in group}
    for i, a in enumerate(points):
        for b in points[i + 1 :]:
            differ = [k for k in a.params if a.params[k] != b.params[k]]
            if len(differ) != 1:
                continue
            gap = abs(a.residual - b.residual)
            if gap <= max(a.tolerance, b.tolerance):
                continue
            name = group_of.get(differ[0], differ[0])
            gaps[name] = max(gaps.get(name, 0.0), _wrong_share(a, b, gap))
    if not gaps:
        return None
    worst = max(gaps.values())
    named = sorted((n for n, g in gaps.items() if g >= ALSO * worst), key=lambda n: -gaps[n])
    return ", ".join(named)


#: Changes below this share of the pair's larger value are noise-sized: they do not set the scale.
FLOOR = 0.01


def _wrong_share(a: SizePoint, b: SizePoint, gap: float) -> float:
    """How much of the change between two sizes the fit gets wrong: the residuals' gap over the
    larger of the measured and the fitted change (at least ``FLOOR`` of the values): a formula
    that grows along a param the memory ignores is wrong by all of its change there, wherever
    the fit is anchored."""
    fitted = [p.value if p.predicted is None else p.predicted for p in (a, b)]
    change = max(abs(a.value - b.value), abs(fitted[0] - fitted[1]))
    return gap / max(change, FLOOR * max(abs(a.value), abs(b.value)), 1e-30)


def _below(pipeline: Pipeline, fit: StageFit, off: Sequence[int]) -> tuple[bool, bool]:
    """(probe-regime, unconfirmed): only sizes smaller than every fitting one miss, and a size
    beyond the fit confirms it (regime) or, with one size off, none does yet (unconfirmed)."""
    points = fit.points
    chosen_rows = {points[i].terms for i in fit.chosen}
    # a size with a chosen one's terms confirms nothing: the fit passes through its twin
    confirming = [i for i in fit.beyond if i not in off]
    larger = [work(pipeline, points[i].params) for i in (*fit.chosen, *confirming)]
    below = all(
        points[i].terms not in chosen_rows and work(pipeline, points[i].params) < min(larger)
        for i in off
    )
    return below and bool(confirming), below and not confirming and len(off) == 1


def _residual(case: _Case) -> Finding:
    name = case.name
    return case.finding(
        FindingKind.RESIDUAL,
        f"{case.what}: the declared terms leave {_left_over(case.fit.points, case.off, case.unit)} "
        f"at the measured sizes, following {name or 'an undeclared term'}; {case.at_risk} at the "
        "target, added to the bound",
        "none needed: its risk at the target is in the stage's bound"
        + (
            f" (a term in {', '.join(case.undeclared)} would predict it exactly)"
            if case.undeclared
            else ""
        ),
    )


def _time_unknown(case: _Case, why: str) -> Finding:
    return case.finding(
        FindingKind.TIME_UNKNOWN,
        f"{case.what}: time unknown at the target: sizes are off the fit ({case.at_risk} were "
        f"it real), but {why}, so they cannot tell a wrong formula from a loaded machine. "
        f"Sizes: {_shown(case.fit.points, case.unit)}",
        "none needed: a note, not an alarm (more --repeat on a quieter machine would decide)",
    )


def _regime(pipeline: Pipeline, case: _Case, target: Point) -> Finding:
    points = case.fit.points
    probed = {a for group in getattr(pipeline, "probe_axes", ()) for a in group}
    moved = {k for i in case.off for k, v in points[i].params.items() if v != target[k]}
    axes = ", ".join(sorted(moved & probed))
    return case.finding(
        FindingKind.PROBE_REGIME,
        f"{case.what}: the smallest size measured outside the formula's steady regime (off the fit "
        f"that the larger sizes confirm, {case.at_risk} had it been used); left out of the "
        f"estimate. Sizes: {_shown(points, case.unit)}",
        (
            f"declare the smallest steady size in the formula file (`probe {axes} >= N`)"
            if axes
            else "probe larger (--probe): the smallest sizes sit outside the steady regime"
        ),
        regime=True,
    )


def _mismatch(case: _Case) -> Finding:
    fit, found = case.fit, case.found
    follows = case.name or "an undeclared term"
    if found is not None and found.direction == case.name:
        follows = f"{case.name} times the stage's measure" if found.scaled else f"{case.name}"
        if not found.declared:
            follows += ", which the declared terms leave out"
    return case.finding(
        FindingKind.FORMULA_MISMATCH,
        f"{case.what}: the declared terms do not explain the measured sizes (left over: "
        f"{_left_over(fit.points, case.off, case.unit)}); the unexplained part follows {follows}; "
        f"{case.at_risk} at the target. Sizes: {_shown(fit.points, case.unit)}",
        _mismatch_step(case, follows.split(",")[0]),
    )


def _mismatch_step(case: _Case, follows: str) -> str:
    """What to do: add a term along the direction, or, where the declared terms already vary
    along it, revise those (never ask for a term the formula has)."""
    fit, found = case.fit, case.found
    if not case.name:
        return f"revise {fit.stage}'s `{fit.quantity} ~` terms in the formula file"
    named = [n.strip() for n in case.name.split(",")]
    if found is not None and found.declared and found.direction in named:
        return (
            f"revise the terms in {found.direction} of {fit.stage}'s `{fit.quantity} ~` in the "
            "formula file: it has some, and the measured sizes do not follow them"
        )
    if not case.undeclared:  # every named direction has declared terms: never ask for one more
        return (
            f"revise the terms in {', '.join(named)} of {fit.stage}'s `{fit.quantity} ~` in the "
            "formula file: it has some, and the measured sizes do not follow them"
        )
    if case.declared:
        follows = ", ".join(case.undeclared)
    return (
        f"add a term in {follows} to {fit.stage}'s `{fit.quantity} ~` (or fix the ones there) "
        "in the formula file"
    )


def _left_over(points: Sequence[SizePoint], off: Sequence[int], unit: str) -> str:
    what = unit.removeprefix("B ").removeprefix("s ")
    return ", ".join(_amount(unit, points[i].residual, signed=True) for i in off) + f" {what}"


def _show_risk(quantity: str, risk: float, share: float) -> str:
    if quantity == Quantity.MEMORY:
        return f"{show_bytes(risk)} at risk ({share:.2%} of the stage's peak)"
    return f"{show_seconds(risk)} at risk ({share:.1%} of the request)"
