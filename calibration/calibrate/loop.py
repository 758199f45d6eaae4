"""The runs of one calibration in order (``Loop``), and the sizes it adds after the first round
(``more_sizes``): for memory from the formulas, the contracts and the costs alone, then one for
time from measured times that never enters a memory figure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction

from attrs import evolve

from artifact.point import Point
from artifact.spelling import point_text
from calibration.calibrate.settle import Settled, settle
from calibration.core.costs import relative_cost
from calibration.core.offload import allocator_reserve
from calibration.core.session import Session
from calibration.probes.evidence import reach
from calibration.probes.far import FarAxis, at_axis, far_axes, far_findings
from calibration.probes.findings import rank
from calibration.probes.level_floor import floored, nearer_sizes
from calibration.probes.policy import memory_terms, work
from calibration.probes.residuals import StageFit
from calibration.probes.sizes import departures, ladder, shape_probe, towards
from calibration.probes.time_probe import covers_memory, time_probe
from runtime import Pipeline
from runtime.estimate import estimate
from runtime.estimate.fit.model import FitCache
from runtime.kinds import EARNED, FindingKind, Quantity
from runtime.record import WarmupRecord

Progress = Callable[[int, int, str], None]
MEMORY, TIME = Quantity.MEMORY, Quantity.TIME


#: The extra sizes' total cost (iterations x memory measure of the repeated stage) stays under
#: half the target's: a size is added only while the sum stays under this share of it. Every size
#: runs once a round, like the target under --verify: at a whole request, measuring the target
#: itself would cost as much as the sizes that predict it; at half, the calibration of a request
#: costs less than the request (the warmup and the probe are its other share).
BUDGET = Fraction(1, 2)
#: A size that reads a weights level's floor nearer the target (``_near_level``) may spend what one
#: request leaves: the warmup, the probe and every extra size, it included, under the target's
#: cost, so the calibration of a request still costs less than the request (``BUDGET``'s ground).
#: Under ``BUDGET`` alone the sizes planned before the first round leave it no room in any case
#: whose bound the floor sets (the tiny SD's and SDXL's UNets, the tiny FLUX's transformer, SD 1.5
#: at real size: 0.05 to 0.14 of the target's cost left, a nearer size 0.22 to 0.48).
WHOLE = Fraction(1)
#: How many larger sizes the loop tries to decide an ``unconfirmed`` finding.
CONFIRM_TRIES = 2


class Loop:
    """The runs of one calibration in order: each size by role, why it was added, its cost."""

    def __init__(
        self,
        session: Session,
        points: dict[str, dict[str, int | bool]],
        sizes: list[tuple[str, str]],
        target: Point,
        repeat: int,
        verify: bool,
        progress: Progress | None,
        most_added: int = 0,
    ) -> None:
        self.session, self.points, self.sizes, self.target = session, points, sizes, target
        self.repeat, self.verify = repeat, verify
        self.tick = progress or (lambda step, total, what: None)
        # known up front, never grown: every size ``more_sizes`` may add counted in (an upper
        # bound the run then finishes under); the warmup and the estimate are the 2
        runs = len(sizes) + most_added + 1 + (1 if verify else 0)
        self.total = 2 + repeat * runs
        self.step = 0
        self.modeler = FitCache()  # each stage and policy fitted once over the whole calibration
        self.roles: list[str] = []
        self.records: list[WarmupRecord] = []
        self.for_time: set[str] = set()  # roles of sizes chosen from measured times
        self.runs: list[WarmupRecord] = []
        self.far: tuple[FarAxis, ...] = ()  # params far past every size, none afforded there
        self.cost = sum(
            (relative_cost(session.formulas, points[role], target) for role, _ in sizes[1:]),
            Fraction(0),
        )
        self.base = sum(  # the warmup's and the probe's (``WHOLE``)
            (relative_cost(session.formulas, points[r], target) for r in ("warmup", "probe")),
            Fraction(0),
        )

    def measure(self, role: str, why: str = "") -> None:
        self.step += 1
        shown = f"{role} {describe(self.points[role])}" + (f" ({why})" if why else "")
        self.tick(self.step, self.total, shown)
        self.roles.append(role)
        self.records.append(self.session.run(self.points[role]))

    def affordable(self, point: Point, whole: bool = False) -> bool:
        """Whether one more size at ``point`` keeps the extra sizes' cost under the budget; with
        ``whole``, the warmup's, the probe's and theirs under the target's (``WHOLE``)."""
        cost = self.cost + relative_cost(self.session.formulas, point, self.target)
        return cost + self.base < WHOLE if whole else cost < BUDGET

    def add_size(
        self, point: dict[str, int | bool], why: str, for_time: bool = False, whole: bool = False
    ) -> bool:
        """One more size, if affordable (``whole``: see ``affordable``) and new: measured now, and
        once in every later round. A size ``for_time`` was chosen from measured times: it never
        enters a memory figure."""
        if point in self.points.values() or not self.affordable(point, whole):
            return False
        role = f"probe {len(self.sizes) + 1}"
        if for_time:
            self.for_time.add(role)
        self.cost += relative_cost(self.session.formulas, point, self.target)
        self.points[role] = point
        self.sizes.append((role, why))
        self.measure(role, why)
        return True

    def split(self) -> tuple[list[WarmupRecord], list[WarmupRecord]]:
        """The records of the sizes chosen from the formulas alone, and those chosen for time."""
        memory = [r for role, r in zip(self.roles, self.records) if role not in self.for_time]
        timed = [r for role, r in zip(self.roles, self.records) if role in self.for_time]
        return memory, timed

    def settle(self, margin: float, uncovered: Sequence[str]) -> Settled:
        """What the records say so far (``settle``), time sizes kept to time, with a ``far-axis``
        finding for each param the target lies far past every size in and none was afforded."""
        memory, timed = self.split()
        settled = settle(self.session, memory, self.target, margin, uncovered, timed, self.modeler)
        if not self.far:
            return settled
        pipeline = self.session.formulas
        far = far_findings(pipeline, self.far, settled.checked.fits, self.target)
        return evolve(settled, findings=tuple(sorted([*settled.findings, *far], key=rank)))

    def verify_target(self, k: int) -> None:
        self.step += 1
        self.tick(
            self.step, self.total, f"verifying at {describe(self.target)} ({k}/{self.repeat})"
        )
        self.runs.append(self.session.run(self.target))
        self.session.recorder.backend.release_pool()


def more_sizes(
    loop: Loop,
    probe: Point,
    target: Point,
    margin: float,
    uncovered: Sequence[str],
    time_tolerance: float | None,
) -> None:
    """After the first round: sizes for memory (``_memory_sizes``), chosen from the formulas, the
    costs and the exact memory alone, then a probe for time (``_time_size``), chosen from measured
    times, that never enters a memory figure: two runs give the same memory bit for bit."""
    settled = _memory_sizes(loop, probe, target, margin, uncovered)
    if time_tolerance is not None:
        _time_size(loop, settled, probe, target, time_tolerance)


def most_added(probe: Point, target: Point, time_tolerance: float | None) -> int:
    """The most sizes ``more_sizes`` can add: ``CONFIRM_TRIES``, two a departing param (its
    shape, its far value), one nearer the target, one for a weights level's floor, one for time:
    the progress's total is known before the first run."""
    return CONFIRM_TRIES + 2 * len(departures(probe, target)) + 2 + (time_tolerance is not None)


def _memory_sizes(
    loop: Loop, probe: Point, target: Point, margin: float, uncovered: Sequence[str]
) -> Settled:
    """Larger sizes until no memory fit is unconfirmed and every growing stage's fit is confirmed
    by a size beyond it (for its evidence margin), then a third value of every param the memory
    grows with (``shape_probe``). Only memory findings decide: time findings come from a clock."""
    pipeline = loop.session.formulas
    settled = loop.settle(margin, uncovered)
    for _ in range(CONFIRM_TRIES):
        memory = [f for f in settled.findings if f.quantity != TIME]
        unsure = any(f.kind == FindingKind.UNCONFIRMED for f in memory)
        unconfirmed_fit = any(
            f.unconfirmed for f in settled.checked.fits if f.quantity == MEMORY
        ) and not any(f.actionable for f in memory)
        if not (unsure or unconfirmed_fit):
            break
        larger = _confirming(loop, settled, probe, target)
        why = "deciding an unconfirmed fit" if unsure else "confirming the fits"
        if larger is None or not loop.add_size(larger, why):
            break
        settled = loop.settle(margin, uncovered)
    for _ in departures(probe, target):
        found = shape_probe(pipeline, [dict(r.params) for r in loop.records], probe, target)
        if found is None or not loop.add_size(
            found[0], f"testing the fit's shape along {found[1]}"
        ):
            break
        settled = loop.settle(margin, uncovered)
    settled = _far(loop, settled, target, margin, uncovered)
    settled = _nearer(loop, settled, probe, target, margin, uncovered)
    return _near_level(loop, settled, probe, target, margin, uncovered)


def _far(
    loop: Loop, settled: Settled, target: Point, margin: float, uncovered: Sequence[str]
) -> Settled:
    """Each param the target lies far past every measured size in (``calibration.probes.far``):
    the cheapest measured size with it at the target's value, lighter than the target in every
    growing stage's memory, when the budget holds it; else ``Loop.far`` names it (a finding)."""
    pipeline = loop.session.formulas
    measured = [dict(r.params) for r in loop.split()[0]]
    unmet: list[FarAxis] = []
    for axis in far_axes(pipeline, measured, target):
        sizes = [
            c
            for c in at_axis(pipeline, measured, axis, target)
            if not covers_memory(pipeline, c, target, loop.records)
        ]
        if sizes and loop.add_size(sizes[0], f"measuring {axis.name} at the target's value"):
            measured.append(sizes[0])
            settled = loop.settle(margin, uncovered)
        else:
            unmet.append(axis)
    if unmet:
        loop.far = tuple(unmet)
        settled = loop.settle(margin, uncovered)
    return settled


#: Past this reach (the target's growing part over the largest measured one) the loop measures a
#: size nearer the target: the evidence margin pads ``PER_EFOLD x ln(reach)``.
REACH = 1.1


def _nearer(
    loop: Loop,
    settled: Settled,
    probe: Point,
    target: Point,
    margin: float,
    uncovered: Sequence[str],
) -> Settled:
    """When some growing stage's target lies past ``REACH`` its largest measured growth, the
    candidate size (``_candidates``) that the fits say brings them nearest (the evidence margin
    pads the log of the reach left), the cheapest of equals: chosen from the formulas, the costs
    and the exact memory alone, so it serves memory and time without a clock."""
    fits = [f for f in settled.checked.fits if f.quantity == MEMORY and f.growing_at_target > 0]
    if max((reach(f) for f in fits), default=1.0) <= REACH:
        return settled
    pipeline = loop.session.formulas
    steps = _candidates(loop, probe, target)
    now = max(reach(f) for f in fits)
    scored = [(_reach_with(pipeline, fits, c), k) for k, c in enumerate(steps)]
    best = min((s for s in scored if s[0] < now), default=None)  # nearest, then cheapest
    if best is None or not loop.add_size(steps[best[1]], "bringing the sizes nearer the target"):
        return settled
    return loop.settle(margin, uncovered)


def _near_level(
    loop: Loop,
    settled: Settled,
    probe: Point,
    target: Point,
    margin: float,
    uncovered: Sequence[str],
) -> Settled:
    """Where a weights level's floor, not its fit, sets a phase's bound (``level_floor.floored``):
    one size nearer the target in that stage's memory (``level_floor.nearer_sizes``), the nearest
    that what one request leaves affords (``WHOLE``) and the cap holds, so the gap the floor
    subtracts is read nearer the target. One weights level (no offload, or every size at the same
    weights) never adds one."""
    pipeline = loop.session.formulas
    stages = floored(settled.estimate.phases)
    measured = [dict(r.params) for r in settled.kept]
    for size in nearer_sizes(pipeline, stages, loop.records, measured, probe, target):
        if not loop.affordable(size, whole=True) or not _held(loop, settled, size, margin):
            continue
        if loop.add_size(size, "reading a weights level's floor nearer the target", whole=True):
            return loop.settle(margin, uncovered)
    return settled


def _held(loop: Loop, settled: Settled, size: Point, margin: float) -> bool:
    """Whether the calibration's cap holds a run at ``size``: uncapped, always; capped, when every
    phase's bound there from the sizes so far (the formulas' terms, each weights level the
    placement holds, each stage's margin as settled) fits the cap less the allocator's reserve."""
    session = loop.session
    if session.capacity is None:
        return True
    there = estimate(
        settled.kept,
        session.formulas,
        target=size,
        margin=margin,
        component_weight_bytes=session.weights,
        stage_margins={m.stage: m.margin for m in settled.margins if m.source in EARNED},
    )
    usable = session.capacity - allocator_reserve(session.device, session.capacity)
    bounds = [p.peak.bound_bytes for p in there.phases]
    return bool(bounds) and all(b is not None and b <= usable for b in bounds)


def _candidates(loop: Loop, probe: Point, target: Point) -> list[dict[str, int | bool]]:
    """The sizes the memory loop may add, cheapest first: the ladder and the halfway points,
    unmeasured, affordable, lighter than the target (``covers_memory``); from the formulas, the
    contracts and the costs alone."""
    pipeline = loop.session.formulas
    measured = [dict(r.params) for r in loop.records]
    out: list[dict[str, int | bool]] = []
    for c in [*towards(pipeline, probe, target), *ladder(pipeline, probe, target)]:
        if (
            c not in out
            and c not in measured
            and work(pipeline, probe) < work(pipeline, c) < work(pipeline, target)
            and loop.affordable(c)
            and not covers_memory(pipeline, c, target, loop.records)
        ):
            out.append(c)
    return sorted(out, key=lambda c: relative_cost(pipeline, c, target))


def _confirming(
    loop: Loop, settled: Settled, probe: Point, target: Point
) -> dict[str, int | bool] | None:
    """The cheapest candidate size beyond every growing memory fit that no size tests yet (terms
    of its own), else the cheapest beyond the most of them, else the cheapest larger one."""
    pipeline = loop.session.formulas
    open_fits = [
        f
        for f in settled.checked.fits
        if f.quantity == MEMORY and f.growing_at_target > 0 and not f.beyond
    ]
    candidates = _candidates(loop, probe, target)

    def tested(c: Point) -> int:
        """How many of the open fits ``c`` would test: its terms are not those of a fitted size."""
        return sum(
            memory_terms(pipeline, f.stage, c) not in {f.points[i].terms for i in f.chosen}
            for f in open_fits
        )

    return max(candidates, key=tested, default=None)  # max keeps the first (cheapest) of a tie


def _reach_with(pipeline: Pipeline, fits: Sequence[StageFit], size: Point) -> float:
    """Every growing stage's reach once ``size`` is measured too (its growth from the fit)."""
    out = 1.0
    for fit in fits:
        grown = fit.growing_at(memory_terms(pipeline, fit.stage, size))
        largest = max((*fit.growing, grown), default=0.0)
        out = max(out, fit.growing_at_target / largest if largest > 0 else 1.0)
    return out


def _time_size(
    loop: Loop, settled: Settled, probe: Point, target: Point, time_tolerance: float
) -> None:
    """A probe for time when a stage's time at the target is too uncertain
    (``calibration.probes.time_probe``): for time only."""
    pipeline = loop.session.formulas

    def candidates() -> Iterator[Point]:
        """The ladder, built only when a stage's time needs a probe (``time_probe`` asks)."""
        yield from (c for c in ladder(pipeline, probe, target) if loop.affordable(c))

    timed = time_probe(
        pipeline,
        settled.for_time,
        settled.estimate,
        target,
        candidates(),
        loop.repeat,
        time_tolerance,
    )
    if timed is not None:
        loop.add_size(timed, "pinning down time", for_time=True)


def describe(params: Point) -> str:
    return point_text(params)
