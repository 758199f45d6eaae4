"""The whole inference: discovery, the ladder, the proposals, the draft and the report."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import zip_longest

from attrs import frozen

from calibration.errors import CalibrationError
from calibration.host import quiet_libraries, torch_threads
from calibration.infer.analyse import Measured, StageProposal, propose
from calibration.infer.draft import draft_text
from calibration.infer.ladder import Size, int_params, plan, steps_across, steps_param
from calibration.infer.layout import StagePlan
from calibration.infer.measure import Factory, Progress, Runner, discover, load, measuring_formulas
from calibration.infer.switches import MAX_SWITCHES, switch_all
from calibration.infer.terms import Point
from runtime import Pipeline
from runtime.record import WarmupRecord

#: Times the base is measured (at the start, after each quarter of the ladder's first part and
#: at the end): the run-to-run spread of time is read from them.
BASE_REPEATS = 5
#: The most sizes measured again where the memory's terms miss a stage's time: a burst on a
#: shared CPU reads as a miss, and a size's time is the least of its runs.
RECHECKS = 6
#: The most int params a skeleton may have (bool params: ``switches.MAX_SWITCHES``).
MAX_PARAMS = 6


@frozen
class Inference:
    """What one inference measured and proposed."""

    pipeline: str
    base: Point
    ran: tuple[str, ...]
    sizes: tuple[Size, ...]
    measured: tuple[Measured, ...]
    proposals: tuple[StageProposal, ...]
    draft: str
    plans: tuple[StagePlan, ...] = ()  # the stages discovery found
    repeats: tuple[WarmupRecord, ...] = ()  # the base measured again, for time's spread
    work: tuple[WarmupRecord, ...] = ()  # the sizes with their work counted, for time's terms
    switched: tuple[Measured, ...] = ()  # the sizes with a bool param flipped, work counted


def proposals_from(
    skeleton: Pipeline,
    plans: Sequence[StagePlan],
    measured: Sequence[Measured],
    base: Point,
    repeats: Sequence[WarmupRecord],
    work: Sequence[WarmupRecord] = (),
    switched: Sequence[Measured] = (),
) -> list[StageProposal]:
    """The proposals from measurements alone (pure): the base's first record and its repeats give
    time's spread; ``work``, the sizes with their work counted, the time terms; ``switched``, the
    sizes with a bool param flipped, its factors (``calibration.infer.switches``)."""
    ints = int_params(skeleton)
    contracts = {p: skeleton.params[p].contracts for p in ints}
    # one order whatever the order measured: the draft depends on the measurements alone
    names = list(skeleton.params)
    measured = sorted(
        measured,
        key=lambda m: (m.held_out, [int(m.record.params.get(n, 0)) for n in names], m.again),
    )
    at_base = [m.record for m in measured if dict(m.record.params) == dict(base)][:1]
    steps = steps_param(skeleton)
    proposals = propose(plans, measured, base, ints, contracts, steps, [*at_base, *repeats], work)
    ordered = sorted(switched, key=lambda m: [int(m.record.params.get(n, 0)) for n in names])
    by_switch = {
        b: [m for m in ordered if m.record.params.get(b) != base[b]]
        for b in switches(skeleton)
        if any(m.record.params.get(b) != base[b] for m in ordered)
    }
    return switch_all(proposals, by_switch, base, ints, contracts, steps)


def _name(skeleton: str) -> str:
    from dslc.build import NotCompiled, load_text

    try:
        book = load_text(skeleton, "<skeleton>")
    except NotCompiled as exc:
        raise CalibrationError(str(exc)) from None
    if len(book) != 1:
        raise CalibrationError(f"the skeleton must hold exactly one pipeline; it has {len(book)}")
    (name,) = book
    if book[name].stages:
        raise CalibrationError(
            f"the skeleton's pipeline {name!r} declares stages already; infer proposes them: "
            "give params, `call` and `probe` lines only"
        )
    return name


def infer(
    factory: Factory,
    skeleton: str,
    *,
    base: Mapping[str, int | bool] | None = None,
    call_kwargs: Callable[[int], Mapping[str, object]] | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    header: str = "",
) -> Inference:
    """Measure ``factory(seed)``'s pipeline around ``base`` and draft the rest of ``skeleton``."""
    name = _name(skeleton)
    sk = load(skeleton, name, "<skeleton>")
    if len(int_params(sk)) > MAX_PARAMS:
        raise CalibrationError(
            f"the skeleton has {len(int_params(sk))} int params; infer searches at most "
            f"{MAX_PARAMS} (the ladder and the monomials grow with them)"
        )
    unknown = sorted(set(base or {}) - set(sk.params))
    if unknown:
        raise CalibrationError(
            f"the base names {', '.join(unknown)}, which the skeleton's pipeline {name!r} does "
            f"not declare (it has {', '.join(sk.params)})"
        )
    point = {**sk.default_workload, **(base or {})}
    if not sk.is_admissible(**point):
        raise CalibrationError(
            f"the base {point} is not admissible: {'; '.join(sk.violations(**point))}"
        )
    steps = steps_param(sk)
    with quiet_libraries(), torch_threads("cpu", 1):
        tick = progress or (lambda step, total, what: None)
        tick(0, 1, "discovering the stages")
        found = discover(factory, skeleton, name, point, steps, seed=seed, call_kwargs=call_kwargs)
        formulas = measuring_formulas(skeleton, name, found.stages)
        sizes = plan(formulas, point)
        runner = Runner(
            factory,
            formulas,
            seed=seed,
            call_kwargs=call_kwargs,
            progress=progress,
            total=planned(sk, sizes, steps, point) + BASE_REPEATS - 1,
        )
        runner.warm(point)
        # the base again through the ladder and at its end: time's spread over the whole ladder,
        # the drift of a shared CPU included (a spread of back-to-back runs would miss it)
        quarters = {len(sizes) * k // 4 for k in range(1, BASE_REPEATS - 1)}
        measured, repeats = [], []
        for k, size in enumerate(sizes):
            if k in quarters:
                repeats.append(runner.measure(point, "base again: time's spread over the ladder"))
            measured.append(Measured(runner.measure(size.point, size.why), size.held_out))
        first = proposals_from(sk, found.stages, measured, point, repeats)
        if steps is not None and any(steps in p.memory_moved_by for p in first):
            more = steps_across(formulas, point, sizes)
            runner.total += planned(sk, [*sizes, *more], steps, point)
            runner.total -= planned(sk, sizes, steps, point)
            measured += [Measured(runner.measure(s.point, s.why), s.held_out) for s in more]
            sizes = [*sizes, *more]
        repeats.append(runner.measure(point, "base at the end: time's spread over the ladder"))
        work = count_work(
            factory,
            formulas,
            counted(sizes, steps, point),
            seed,
            call_kwargs,
            runner,
            "the work counted",
        )
        proposals = proposals_from(sk, found.stages, measured, point, repeats, work)
        again = rechecks(proposals)
        if again:
            runner.total += len(again)
            held = {tuple(m.record.params.items()): m.held_out for m in measured}
            measured += [
                Measured(
                    runner.measure(p, "again: a time off the memory's terms"),
                    held.get(tuple(p.items()), False),
                    again=True,
                )
                for p in again
            ]
            proposals = proposals_from(sk, found.stages, measured, point, repeats, work)
        flips = flipped(sk, sizes, steps, point)
        records = count_work(factory, formulas, flips, seed, call_kwargs, runner) if flips else []
        switched = [Measured(r, s.held_out) for s, r in zip(flips, records, strict=True)]
        proposals = proposals_from(sk, found.stages, measured, point, repeats, work, switched)
    draft = draft_text(skeleton, proposals, header)
    return Inference(
        name,
        point,
        found.ran,
        tuple(sizes),
        tuple(measured),
        tuple(proposals),
        draft,
        tuple(found.stages),
        tuple(repeats),
        tuple(work),
        tuple(switched),
    )


def planned(skeleton: Pipeline, sizes: Sequence[Size], steps: str | None, base: Point) -> int:
    """The runs a ladder of ``sizes`` costs: measured, counted again, and flipped."""
    return (
        len(sizes) + len(counted(sizes, steps, base)) + len(flipped(skeleton, sizes, steps, base))
    )


def counted(sizes: Sequence[Size], steps: str | None, base: Point) -> list[Size]:
    """The sizes whose work is counted: those at the base's steps (the time terms leave the
    steps out: a stepped stage's one-time work spreads over its iterations)."""
    return [s for s in sizes if steps is None or s.point[steps] == base[steps]]


def switches(skeleton: Pipeline) -> list[str]:
    """The bool params flipped, in their declared order (the rest stay at the base's value)."""
    return [n for n, p in skeleton.params.items() if p.type == "bool"][:MAX_SWITCHES]


def flipped(
    skeleton: Pipeline, sizes: Sequence[Size], steps: str | None, base: Point
) -> list[Size]:
    """The sizes measured with a switch flipped: those at the base's steps (each param alone and
    together: memory and work) and the steps ladder at the base's other params (iterations),
    where admissible; the flipped param is named in ``why``."""
    out = []
    for b in switches(skeleton):
        for s in sizes:
            base_steps = steps is None or s.point[steps] == base[steps]
            if not base_steps and any(s.point[n] != base[n] for n in base if n != steps):
                continue  # neither the counted sizes nor the steps ladder
            point = {**s.point, b: not bool(base[b])}
            if skeleton.is_admissible(**point):
                shown = "true" if point[b] else "false"
                out.append(Size(point, f"{b}={shown}: the switch flipped", s.held_out))
    return out


def count_work(
    factory: Factory,
    formulas: Pipeline,
    sizes: Sequence[Size],
    seed: int,
    call_kwargs: Callable[[int], Mapping[str, object]] | None,
    timed: Runner,
    what: str | None = None,
) -> list[WarmupRecord]:
    """The ladder's sizes again on a fresh pipeline, the work counted (the same in every run):
    what the time terms are chosen from; the progress goes on from ``timed``'s."""
    counter = Runner(
        factory,
        formulas,
        seed=seed,
        call_kwargs=call_kwargs,
        progress=timed.tick,
        total=timed.total,
        counting=True,
    )
    counter.step = timed.step
    counter.warm(sizes[0].point)
    records = [counter.measure(s.point, what or s.why) for s in sizes]
    timed.step = counter.step
    return records


def rechecks(proposals: Sequence[StageProposal]) -> list[Point]:
    """The sizes to measure once more: where a stage's measured time is off its chosen terms,
    the worst first, the stages in turn, at most ``RECHECKS``."""
    out: list[Point] = []
    for row in zip_longest(*(p.time.measured.misses for p in proposals)):
        for p in row:
            if p is not None and p not in out:
                out.append(p)
    return out[:RECHECKS]
