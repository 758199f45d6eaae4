"""From the ladder's records to proposals: each stage's iterations, memory and time terms.

Pure: records in, values out. The memory of a stage at a size is its phase's peak above the
request's baseline; its time, the stage's steady seconds per iteration: both the core's one stage
sample (``runtime.estimate.fit.stage_sample``), what ``calibrate`` checks. A param moves a
quantity when a size that departs from the base in it alone measures otherwise; only those params
enter the stage's monomials.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from attrs import evolve, frozen

from artifact.point import Point
from calibration.infer.layout import StagePlan
from calibration.infer.search import (
    MAX_TERMS,
    MEMORY_SLACK,
    IterationFit,
    TermFit,
    fit_iterations,
    fit_terms,
)
from calibration.infer.terms import (
    Feature,
    IterationForm,
    Monomial,
    features,
    iteration_forms,
    monomials,
)
from calibration.infer.time_terms import WORK_SLACK, TimeChoice, choose_time
from runtime.estimate.fit import PhaseKind, stage_sample
from runtime.estimate.fit.model import Sample
from runtime.estimate.fit.noise import ONE_SPREAD, tolerance
from runtime.record import WarmupRecord


@frozen
class Measured:
    """One size's record, whether it only checks the fits, and whether it is a time recheck
    (a size measured again: only its time counts)."""

    record: WarmupRecord
    held_out: bool
    again: bool = False


@frozen
class Regime:
    param: str
    minimum: int
    dropped: tuple[Point, ...]


@frozen
class Switched:
    """What flipping one switch showed for one stage: each quantity's verdict, for the draft's
    comments and the report; ``review`` names those that stay unexplained."""

    param: str
    value: bool  # the flipped value measured
    sizes: int
    iterations: str
    memory: str
    time: str
    review: tuple[str, ...]  # the quantities left unexplained ("iterations", "memory", "time")
    unchanged: bool = False  # every flipped size measured what the base's value did
    failed: int = 0  # flipped sizes whose request failed (the report's `switched` has the errors)

    @property
    def at(self) -> str:
        """The flipped value as a formula writes it: `cfg=false`."""
        return f"{self.param}={'true' if self.value else 'false'}"


@frozen
class StageProposal:
    plan: StagePlan
    iterations: IterationFit
    counts: tuple[tuple[Point, int], ...]
    memory: TermFit
    memory_samples: tuple[Sample, ...]
    memory_moved_by: tuple[str, ...]
    regimes: tuple[Regime, ...]
    approximate: bool
    time: TimeChoice  # what the draft's `time ~` says (from the work), and the measured check
    time_samples: tuple[Sample, ...]
    work_samples: tuple[Sample, ...] = ()
    switches: tuple[Switched, ...] = ()  # each bool param flipped (calibration.infer.switches)
    base_memory: TermFit | None = None  # the fit at the base's values, before a switch's factors


def count_of(record: WarmupRecord, plan: StagePlan) -> int | None:
    if plan.stepped:
        for s in record.stage_iterations:
            if s.stage == plan.name:
                return s.measured
        return None
    counts = [p.count for p in record.phases if p.kind == PhaseKind.STAGE and p.name == plan.name]
    return counts[0] if counts else None


def memory_of(record: WarmupRecord, stage: str) -> float | None:
    """The stage's memory above the request's baseline: the core's one stage sample."""
    memory = stage_sample(record, stage, 1).memory
    return None if memory is None else float(memory)


def seconds_of(record: WarmupRecord, stage: str, iterations: int) -> float | None:
    """The stage's steady time (or counted work) per iteration: the core's one stage sample
    (the median of its iterations after the first; a one-shot stage's time over its count),
    what calibrate checks `time ~` against."""
    return stage_sample(record, stage, max(iterations, 1)).seconds


def moved_by(
    samples: Sequence[Sample], base: Point, params: Sequence[str], slack: float
) -> list[str]:
    """The params whose one-at-a-time sizes measure otherwise than the base."""
    at_base = [s.value for s in samples if dict(s.point) == dict(base)]
    if not at_base:
        return list(params)
    ref = at_base[0]
    out = []
    for p in params:
        alone = [
            s.value
            for s in samples
            if s.point[p] != base[p] and all(s.point[q] == base[q] for q in base if q != p)
        ]
        if any(abs(v - ref) > slack for v in alone):
            out.append(p)
    return out


def memory_moves_with(
    plans: Sequence[StagePlan], measured: Sequence[Measured], base: Point, param: str
) -> bool:
    """Whether some stage's memory moves with ``param`` alone (no term search needed)."""
    for plan in plans:
        samples = [
            Sample.at(m.record.params, v, m.held_out)
            for m in measured
            if m.record.ok and (v := memory_of(m.record, plan.name)) is not None
        ]
        if param in moved_by(samples, base, [param], MEMORY_SLACK):
            return True
    return False


def feature_table(
    contracts: Mapping[str, Sequence[str]], params: Sequence[str], steps: str | None
) -> dict[str, tuple[Feature, ...]]:
    return {p: features(p, contracts[p], steps=p == steps) for p in params}


#: How far an approximate memory fit may miss a size, relative, when no set of the grammar is
#: exact (a tiny model's attention kernels round in ways no low-degree monomial follows).
APPROXIMATE = 0.02
#: The fewest distinct values a param keeps under a probe minimum (the fit must still be tested).
KEEP_VALUES = 3
#: Term sets one regime's search may try (fewer than a whole search: many regimes are tried).
REGIME_SETS = 12_000


def _minimums(samples: Sequence[Sample], param: str, base: Point) -> list[int]:
    """Minimums that leave out values under the base's only (the ladder is built around it)."""
    values = sorted({int(s.point[param]) for s in samples})
    return [v for v in values[1 : max(1, len(values) - KEEP_VALUES + 1)] if v <= int(base[param])]


def _regimes(
    samples: Sequence[Sample], params: Sequence[str], base: Point
) -> list[tuple[tuple[str, int], ...]]:
    """`probe P >= N` candidates, smallest first: one param's smallest values left out, then two
    params' together; never above the base."""
    singles = [(p, n) for p in params for n in _minimums(samples, p, base)]
    out: list[tuple[tuple[str, int], ...]] = [(one,) for one in singles]
    out += [(a, b) for i, a in enumerate(singles) for b in singles[i + 1 :] if a[0] != b[0]]
    return out


def tiers(table: Mapping[str, Sequence[Feature]], moving: Sequence[str]) -> list[list[Monomial]]:
    """The plain monomials (params and latent counts), then all of them (clamps too)."""
    plain = monomials({p: [f for f in table[p] if f.rank < 2] for p in moving})
    full = monomials({p: table[p] for p in moving})
    return [plain, full] if len(full) > len(plain) else [plain]


def work_tiers(
    table: Mapping[str, Sequence[Feature]], moving: Sequence[str]
) -> list[list[Monomial]]:
    """The time's candidates: the plain monomials, then their squares too (an attention's work
    grows with its tokens squared: `time ~ [tokens, tokens * tokens]`)."""
    plain = monomials({p: [f for f in table[p] if f.rank < 2] for p in moving})
    squares = [Monomial(m.features * 2) for m in plain]
    return [plain, plain + squares] if squares else [plain]


def _with_regimes(
    candidates: Sequence[Sequence[Monomial]],
    samples: Sequence[Sample],
    moving: Sequence[str],
    base: Point,
) -> tuple[TermFit, tuple[Regime, ...]]:
    fit = fit_terms(candidates, samples)
    if fit.terms is not None and not fit.terms:
        return fit, ()
    # Fewer terms once the smallest sizes of a param are left out: a regime, `probe P >= N`.
    fewer = MAX_TERMS if fit.terms is None else len(fit.terms) - 1
    for regime in _regimes(samples, moving, base):
        kept = [s for s in samples if all(int(s.point[p]) >= n for p, n in regime)]
        if len(kept) < max(8, len(samples) // 3):
            continue
        trial = fit_terms(candidates, kept, fewer, REGIME_SETS)
        if trial.terms is not None:
            found = tuple(
                Regime(p, n, tuple(s.point for s in samples if int(s.point[p]) < n))
                for p, n in regime
            )
            return trial, found
    return fit, ()


def fit_memory(
    samples: Sequence[Sample],
    base: Point,
    params: Sequence[str],
    table: Mapping[str, Sequence[Feature]],
) -> tuple[TermFit, tuple[str, ...], tuple[Regime, ...], bool]:
    """The smallest exact memory terms, with probe minimums when the smallest sizes are off; when
    no set is exact, the smallest plain one within ``APPROXIMATE`` of every size (flagged)."""
    moving = moved_by(samples, base, params, MEMORY_SLACK)
    candidates = tiers(table, moving)
    fit, regimes = _with_regimes(candidates, samples, moving, base)
    if fit.terms is not None:
        return fit, tuple(moving), regimes, False
    loose = [evolve(s, tolerance=max(s.tolerance, APPROXIMATE * abs(s.value))) for s in samples]
    approx, regimes = _with_regimes(candidates[:1], loose, moving, base)
    if approx.terms is None:
        return fit, tuple(moving), (), False
    return approx, tuple(moving), regimes, True


@frozen
class Inputs:
    """What every stage's proposal is made from: the sizes (a time recheck counted once), the
    work counted at the base's steps, the grammar and the base's repeats."""

    ok: tuple[Measured, ...]  # each size once (its first run)
    everything: tuple[Measured, ...]  # every run, rechecks too: a size's time is its least
    counted: Mapping[tuple[tuple[str, int], ...], WarmupRecord]
    held_out: Mapping[tuple[tuple[str, int], ...], bool]
    table: Mapping[str, tuple[Feature, ...]]
    forms: tuple[IterationForm, ...]
    base: Point
    ints: tuple[str, ...]
    steps: str | None
    base_repeats: tuple[WarmupRecord, ...]


def inputs(
    measured: Sequence[Measured],
    base: Point,
    ints: Sequence[str],
    contracts: Mapping[str, Sequence[str]],
    steps: str | None,
    base_repeats: Sequence[WarmupRecord],
    work: Sequence[WarmupRecord],
    lows: Mapping[str, int | None] | None = None,
) -> Inputs:
    everything = [m for m in measured if m.record.ok]
    # a size measured again (a time recheck) counts once; its time is the least of its runs
    first_of: dict[tuple[tuple[str, int], ...], Measured] = {}
    for m in sorted(everything, key=lambda m: m.again):
        first_of.setdefault(_key(m.record.params), m)
    ok = [m for m in everything if first_of[_key(m.record.params)] is m]
    table = feature_table(contracts, ints, steps)
    lets = [f for p in ints for f in table[p] if f.let is not None]
    held_out = {_key(m.record.params): m.held_out for m in ok}
    # the work at the base's steps (calibration.infer.run.counted)
    counted = {
        _key(r.params): r
        for r in work
        if r.ok
        and _key(r.params) in held_out
        and (steps is None or r.params.get(steps) == base.get(steps))
    }
    forms = tuple(iteration_forms(ints, lets, lows))
    return Inputs(
        tuple(ok),
        tuple(everything),
        counted,
        held_out,
        table,
        forms,
        base,
        tuple(ints),
        steps,
        tuple(base_repeats),
    )


def propose(
    plans: Sequence[StagePlan],
    measured: Sequence[Measured],
    base: Point,
    ints: Sequence[str],
    contracts: Mapping[str, Sequence[str]],
    steps: str | None,
    base_repeats: Sequence[WarmupRecord],
    work: Sequence[WarmupRecord] = (),
    lows: Mapping[str, int | None] | None = None,
) -> list[StageProposal]:
    """Every stage's proposal from the measured sizes (failed requests left out); ``work``: the
    same sizes with the work counted (``calibration.infer.work``), for the time terms; ``lows``:
    the params' smallest values (no iteration formula negative there)."""
    given = inputs(measured, base, ints, contracts, steps, base_repeats, work, lows)
    return [propose_stage(plan, given) for plan in plans]


def propose_stage(plan: StagePlan, given: Inputs) -> StageProposal:
    """One stage's iterations, memory and time from ``given``."""
    counts = [
        (dict(m.record.params), c, m.held_out)
        for m in given.ok
        if (c := count_of(m.record, plan)) is not None
    ]
    iterations = fit_iterations(given.forms, counts)
    mem = [
        Sample.at(m.record.params, v, m.held_out)
        for m in given.ok
        if (v := memory_of(m.record, plan.name)) is not None
    ]
    memory, moving, regimes, approximate = fit_memory(mem, given.base, given.ints, given.table)
    time, times, works = _time(plan, given, memory, regimes)
    return StageProposal(
        plan,
        iterations,
        tuple((p, c) for p, c, _ in counts),
        memory,
        tuple(mem),
        moving,
        regimes,
        approximate,
        time,
        tuple(times),
        tuple(works),
    )


def _time(
    plan: StagePlan, given: Inputs, memory: TermFit, regimes: Sequence[Regime]
) -> tuple[TimeChoice, list[Sample], list[Sample]]:
    """The stage's `time ~` from its counted work, checked against its measured times (the
    least run of a size), in the memory's regimes."""
    spread = _spread(given.base_repeats, plan)
    least: dict[tuple[tuple[str, int], ...], float] = {}
    for m in given.everything:
        v = seconds_of(m.record, plan.name, count_of(m.record, plan) or 1)
        key = _key(m.record.params)
        if v is not None and (key not in least or v < least[key]):
            least[key] = v
    times = [
        Sample.at(m.record.params, v, m.held_out, tolerance(ONE_SPREAD, v, spread * v))
        for m in given.ok
        if (v := least.get(_key(m.record.params))) is not None
        and in_regimes(m.record.params, regimes)
    ]
    works = [
        Sample.at(r.params, v, given.held_out[key])
        for key, r in sorted(given.counted.items())
        if (v := seconds_of(r, plan.name, count_of(r, plan) or 1)) is not None
        and in_regimes(r.params, regimes)
    ]
    timed = [p for p in given.ints if p != given.steps]  # a step's time grows not with steps
    scale = max((abs(w.value) for w in works), default=0.0)
    work_moving = moved_by(works, given.base, timed, WORK_SLACK * scale)
    # the memory's terms without steps: the guess where no set gives the work
    guess = [
        Monomial(kept)
        for m in memory.terms or ()
        if (kept := tuple(f for f in m.features if f.param != given.steps))
    ]
    plain = monomials({p: given.table[p][:1] for p in timed})
    candidates = work_tiers(given.table, work_moving)
    time = choose_time(works, times, list(dict.fromkeys(guess)), candidates, plain, spread)
    return time, times, works


def in_regimes(point: Point, regimes: Sequence[Regime]) -> bool:
    """Whether ``point`` is at or above every probe minimum (the sizes the fits hold for)."""
    return all(int(point[r.param]) >= r.minimum for r in regimes)


def _key(params: Point) -> tuple[tuple[str, int], ...]:
    return tuple((k, int(v)) for k, v in params.items())


def _spread(records: Sequence[WarmupRecord], plan: StagePlan) -> float:
    """The base's relative run-to-run spread of the stage's time (0 under two runs): (max - min)
    / median, the least and the greatest left out from five runs on (one burst of another
    process is not the spread; a drift over the ladder moves several runs and is)."""
    values = sorted(
        v
        for r in records
        if r.ok and (v := seconds_of(r, plan.name, count_of(r, plan) or 1)) is not None
    )
    if len(values) < 2:
        return 0.0
    middle = statistics.median(values)
    kept = values[1:-1] if len(values) >= 5 else values
    return (kept[-1] - kept[0]) / middle if middle else 0.0
