"""Do the measured sizes agree with the formulas? Findings, each with its consequence at the target.

Each stage's memory and time is fitted through its measured sizes and every other size is tested
against the fit (``calibration.probes.residuals``: a residual beyond what the measurement alone can
produce is evidence). The residual is carried to the target as a *risk* (bytes or seconds the
formula may miss by there: the residual grown by how much larger the stage's measure and the
direction it follows are at the target) and judged by its consequence, its *share* of the stage's
peak (memory) or of the request's time:

- *formula-mismatch* (actionable): a material residual (``MATERIAL``) that the sizes cannot put down
  to a probe below the steady regime: two sizes with the same terms measured differently, a size
  larger than a confirming one off the fit, or several sizes off with none confirming. It names the
  direction the unexplained part follows and what to change.
- *probe-regime*: only sizes smaller than every size that fits miss, and a size beside those the fit
  passes through confirms it: the small probes sat outside the formula's steady regime. They are
  left out of the estimate; declaring `probe X >= N` keeps later probes out of it.
- *unconfirmed*: only the smallest size misses and nothing confirms the fit yet; the loop adds a
  larger size (``calibration.calibrate.run``), so this is shown only when no size between the probe
  and the target could decide.
- *residual*: memory beyond the backend's granularity whose consequence at the target is immaterial
  (a scheduler's step arrays); not actionable: its risk is added to the stage's bound.
- *iteration-mismatch* (actionable): the recorder counted another number of iterations than the
  formula's at a measured size.
- *not-estimable* (actionable): a memory phase whose target term vector is not in the span of the
  measured sizes' (exact rational rank): a kink (``min``, ``max``, a clamp, an ``if`` threshold, a
  contract) between the probe and the target that no size within the cost budget crosses. The
  phase keeps its conservative (scaled) bound and its stage the fixed margin, never one from
  evidence.
- *stage-not-measured* (actionable): a stage the formula runs never opened (its `uses` names a
  component or method that did not run), so its memory and time went to other phases unseen.

A time residual must exceed the noise in every run (``residuals.Z``) and be material: a time finding
that could flip between runs is noise, never a mismatch. A material one counts only on clean
evidence (``calibration.probes.time_evidence``: at least three runs of every size it rests on, its
residual beyond their spread); otherwise it is a *time-unknown* note, never an alarm.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence

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
from calibration.probes.policy import memory_terms, work
from calibration.probes.residuals import SizePoint, StageFit, stage_fit, within_float
from calibration.probes.time_evidence import unclean
from runtime import Pipeline
from runtime.estimate.fit.exact import estimable, row
from runtime.estimate.fit.noise import memory_slack
from runtime.kinds import FindingKind, PhaseKind, Quantity
from runtime.record import WarmupRecord

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
    }
)

#: Finding kinds that are notes: nothing to act on (a residual's risk is in the bound, a time too
#: noisy to judge), so they say what they mean rather than a next step, and --quiet drops them.
NOTES = frozenset({FindingKind.RESIDUAL, FindingKind.TIME_UNKNOWN})


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
    confirming = [i for i in range(len(points)) if i not in fit.chosen and i not in off]
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


def iteration_findings(pipeline: Pipeline, records: Sequence[WarmupRecord]) -> list[Finding]:
    """Stages whose counted iterations differ from the formula's at a measured size."""
    out: dict[str, Finding] = {}
    for record in records:
        if not record.ok:
            continue
        values = pipeline.evaluate(**record.params)
        for pair in record.stage_iterations:
            if pair.source != "counted" or pair.stage not in values or pair.stage in out:
                continue
            declared = int(values[pair.stage].iterations)
            if pair.measured != declared:
                at = point_text(record.params)
                depends = [
                    name
                    for name, default in pipeline.default_workload.items()
                    if name in record.params
                    and record.params[name] != default
                    and pipeline.is_admissible(**{**record.params, name: default})
                    and pipeline.evaluate(**{**record.params, name: default})[pair.stage].iterations
                    != declared
                ]
                out[pair.stage] = Finding(
                    FindingKind.ITERATION_MISMATCH,
                    pair.stage,
                    Quantity.ITERATIONS,
                    f"{pair.stage}: the pipeline ran {pair.measured} iterations at {at}, the "
                    f"formula says {declared}; every per-iteration figure at the target is off by "
                    "as much",
                    (),
                    ", ".join(depends) or None,
                    risk=float(abs(pair.measured - declared)),
                    share=abs(pair.measured - declared) / max(declared, 1),
                    next_step=f"fix {pair.stage}'s `iterations =` in the formula file",
                )
    return list(out.values())


def unmeasured_findings(pipeline: Pipeline, records: Sequence[WarmupRecord]) -> list[Finding]:
    """Stages the formula runs that never opened in any request: their `uses` named something that
    did not run, so their memory and time went to other phases unseen."""
    ran = {p.stage for r in records if r.ok for p in r.phases if p.stage is not None}
    out = []
    for stage in pipeline.stages:
        if stage in ran:
            continue
        runs = [r for r in records if r.ok and pipeline.evaluate(**r.params)[stage].iterations > 0]
        if not runs:
            continue
        uses = ", ".join(f"{u.component}.{u.method}" for u in pipeline.uses.get(stage, ()))
        out.append(
            Finding(
                FindingKind.STAGE_NOT_MEASURED,
                stage,
                Quantity.MEMORY,
                f"{stage}: the formula runs it in every request measured, but what it `uses` "
                f"({uses or 'nothing'}) never ran: nothing was measured for it, and its memory "
                "and time were counted in other phases",
                (),
                share=1.0,  # the stage's whole figure is unknown
                next_step=f"name the component and method that run {stage} in its `uses` line",
            )
        )
    return out


def _fits(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    target: Point,
    backend: str,
    quantities: Collection[Quantity],
) -> list[StageFit]:
    """Every stage's fits: memory one per phase and layout (records whose active components differ
    are never fitted together), time one per stage."""
    fits: list[StageFit] = []
    slack = memory_slack(backend)
    for stage in pipeline.stages:
        phases = {
            (p.kind, p.name, tuple(sorted(p.active_components)))
            for r in records
            if r.ok
            for p in r.phases
            if p.stage == stage
        }
        for kind, name, layout in sorted(phases, key=lambda k: (k[0] != PhaseKind.STAGE, k)):
            if Quantity.MEMORY not in quantities:
                break
            fit = stage_fit(
                pipeline, records, stage, Quantity.MEMORY, target, slack, (kind, name), layout
            )
            if fit is not None:
                fits.append(fit)
        if Quantity.TIME in quantities:
            fit = stage_fit(pipeline, records, stage, Quantity.TIME, target, slack)
            if fit is not None:
                fits.append(fit)
    return fits


def check(
    pipeline: Pipeline,
    records: Sequence[WarmupRecord],
    target: Point,
    backend: str,
    quantities: Collection[Quantity] = (Quantity.MEMORY, Quantity.TIME),
) -> Checked:
    """Every stage's memory and time (those in ``quantities``), and the counted iterations (with
    memory), checked; findings ranked by their share at the target (actionable first)."""
    fits = _fits(pipeline, records, target, backend, quantities)
    at_target = pipeline.evaluate(**target)
    request = sum(
        max(f.at_target, 0.0)
        * within_float(at_target[f.stage].iterations, f"{f.stage}'s iterations", target)
        for f in fits
        if f.quantity == Quantity.TIME
    )
    found: list[Finding] = []
    if Quantity.MEMORY in quantities:
        found += unmeasured_findings(pipeline, records)
        found += iteration_findings(pipeline, records)
        found += not_estimable_findings(pipeline, fits, target)
    worst: dict[tuple[str, str], Finding] = {}  # one a stage and quantity: its worst phase's
    for fit in fits:
        iterations = int(at_target[fit.stage].iterations)
        scale = _stage_peak(records, fit) if fit.quantity == Quantity.MEMORY else request
        finding = classify(pipeline, fit, target, scale, iterations)
        key = (fit.stage, fit.quantity)
        if finding is not None and (key not in worst or rank(finding) < rank(worst[key])):
            worst[key] = finding
    quiet = tuple(f for f in worst.values() if f.kind == FindingKind.RESIDUAL and f.share < DETAIL)
    found += [f for f in worst.values() if f not in quiet]
    found.sort(key=rank)
    return Checked(tuple(found), tuple(fits), quiet)


def not_estimable_findings(
    pipeline: Pipeline, fits: Sequence[StageFit], target: Point
) -> list[Finding]:
    """Memory phases whose target term vector is not in the span of their sizes' (exact rank): a
    ``min``/``max``/clamp/``if`` threshold or a contract between the probe and the target that no
    size crosses. The estimate keeps its conservative bound; the stage gets no evidence margin."""
    out: dict[str, Finding] = {}
    for fit in fits:
        if fit.quantity != Quantity.MEMORY or fit.estimable or fit.stage in out:
            continue
        moved = [
            name
            for name, value in target.items()
            if any(p.params[name] != value for p in fit.points)
            and _closes(pipeline, fit, name, target)
        ]
        along = ", ".join(moved) or "the params the target departs in"
        out[fit.stage] = Finding(
            FindingKind.NOT_ESTIMABLE,
            fit.stage,
            Quantity.MEMORY,
            f"{fit.stage} memory ({fit.phase}): the measured sizes do not determine its terms at "
            f"the target (the target's term vector is not in the span of theirs: a min, max, "
            f"clamp, if or contract along {along} that no size crosses within the cost budget); "
            "its bound is the conservative scaled one, with the fixed margin and no evidence",
            fit.points,
            along,
            share=1.0,
            next_step=f"measure a size past the kink along {along}: a --probe nearer the target",
        )
    return list(out.values())


def _closes(pipeline: Pipeline, fit: StageFit, name: str, target: Point) -> bool:
    """Whether the largest size with ``name`` moved alone to the target's value would determine
    the target (the kink lies along ``name``)."""
    moved = {**fit.points[0].params, name: target[name]}
    if not pipeline.is_admissible(**moved):
        return False
    rows = [row(p.terms) for p in fit.points]
    rows.append(row(memory_terms(pipeline, fit.stage, moved)))
    return estimable(rows, row(fit.target_terms))


def rank(finding: Finding) -> tuple[bool, float, str, str]:
    """How findings are ordered: those to act on first, then by their share at the target."""
    return (not finding.actionable, -finding.share, finding.stage, finding.quantity)


def _stage_peak(records: Sequence[WarmupRecord], fit: StageFit) -> float:
    """The stage's peak at the target: the fit above the baseline plus the typical baseline."""
    baselines = [r.baseline_allocated for r in records if r.ok]
    return fit.at_target + (statistics.median(baselines) if baselines else 0.0)
