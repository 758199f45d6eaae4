"""The whole inference: discovery, the ladder, the proposals, the draft and the report."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import zip_longest

from attrs import Factory as Factory_
from attrs import define, frozen

from artifact.point import Point
from calibration.core.host import quiet_libraries, torch_threads
from calibration.errors import CalibrationError
from calibration.infer.analyse import Measured, StageProposal, memory_moves_with, propose
from calibration.infer.draft import draft_text
from calibration.infer.ladder import (
    DEFAULT_SIZES,
    Size,
    cheapest_base,
    int_params,
    plan,
    steps_across,
    steps_param,
)
from calibration.infer.layout import StagePlan
from calibration.infer.measure import (
    Discovered,
    Factory,
    Progress,
    Runner,
    discover,
    load,
    measuring_formulas,
)
from calibration.infer.switches import MAX_SWITCHES, switch_all
from runtime import Pipeline
from runtime.estimate.fit import point_key
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
    default: Point = Factory_(dict)  # the skeleton's default workload: each term's part there


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
    lows = {p: skeleton.params[p].min for p in ints}
    repeats = [*at_base, *repeats]
    proposals = propose(plans, measured, base, ints, contracts, steps, repeats, work, lows)
    ordered = sorted(switched, key=lambda m: [int(m.record.params.get(n, 0)) for n in names])
    by_switch = {
        b: [m for m in ordered if m.record.params.get(b) != base[b]]
        for b in switches(skeleton)
        if any(m.record.params.get(b) != base[b] for m in ordered)
    }
    return switch_all(proposals, by_switch, base, ints, contracts, steps, lows)


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


def base_point(sk: Pipeline, name: str, base: Point | None) -> Point:
    """The base the ladder is built around: ``base`` over the cheapest admissible size (the
    default workload where ``base`` and the cheapest size do not go together)."""
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
    point = {**cheapest_base(sk), **(base or {})}
    if not sk.is_admissible(**point):
        point = {**sk.default_workload, **(base or {})}
    if not sk.is_admissible(**point):
        raise CalibrationError(
            f"the base {point} is not admissible: {'; '.join(sk.violations(**point))}"
        )
    return point


@frozen
class Setup:
    """What every step of one inference shares: the skeleton, the stages found, the base."""

    factory: Factory
    skeleton: str
    name: str
    sk: Pipeline
    formulas: Pipeline  # the skeleton with the stages found, empty: what the ladder measures
    found: Discovered
    base: Point
    steps: str | None
    seed: int
    call_kwargs: Callable[[int], Mapping[str, object]] | None
    most: int = DEFAULT_SIZES  # the sizes the ladder holds, both parts together


@define
class State:
    """What the steps have measured so far, and the proposals made from it."""

    runner: Runner
    sizes: list[Size] = Factory_(list)
    measured: list[Measured] = Factory_(list)
    repeats: list[WarmupRecord] = Factory_(list)
    work: list[WarmupRecord] = Factory_(list)
    switched: list[Measured] = Factory_(list)
    proposals: list[StageProposal] = Factory_(list)


def fit(setup: Setup, state: State) -> list[StageProposal]:
    """The proposals from everything measured so far (pure: ``proposals_from``)."""
    return proposals_from(
        setup.sk,
        setup.found.stages,
        state.measured,
        setup.base,
        state.repeats,
        state.work,
        state.switched,
    )


def measure_ladder(setup: Setup, state: State) -> None:
    """The planned ladder, the base again after each quarter of it: time's spread over the
    whole ladder, the drift of a shared CPU included (back-to-back runs would miss it)."""
    runner = state.runner
    runner.warm(setup.base)
    quarters = {len(state.sizes) * k // 4 for k in range(1, BASE_REPEATS - 1)}
    for k, size in enumerate(state.sizes):
        if k in quarters:
            why = "base again: time's spread over the ladder"
            state.repeats.append(runner.measure(setup.base, why))
        state.measured.append(Measured(runner.measure(size.point, size.why), size.held_out))


def extend_steps(setup: Setup, state: State) -> None:
    """The steps ladder again one level up in the other params, where memory moves with steps
    (a history term multiplies the latent size)."""
    steps = setup.steps
    if steps is None or not memory_moves_with(
        setup.found.stages, state.measured, setup.base, steps
    ):
        return
    more = steps_across(setup.formulas, setup.base, state.sizes, setup.most)
    state.measured += [Measured(state.runner.measure(s.point, s.why), s.held_out) for s in more]
    state.sizes += more


def count(setup: Setup, state: State) -> None:
    """The base at the end (time's spread), then the counted sizes' work on a fresh pipeline."""
    why = "base at the end: time's spread over the ladder"
    state.repeats.append(state.runner.measure(setup.base, why))
    sizes = counted(state.sizes, setup.steps, setup.base)
    state.work += count_work(setup, sizes, state.runner, "the work counted")


def recheck(setup: Setup, state: State) -> None:
    """The sizes whose time is off the chosen terms, measured once more (their least counts)."""
    again = rechecks(fit(setup, state))
    if not again:
        return
    held = {point_key(m.record.params): m.held_out for m in state.measured}
    why = "again: a time off the memory's terms"
    state.measured += [
        Measured(state.runner.measure(p, why), held.get(point_key(p), False), again=True)
        for p in again
    ]


def flip(setup: Setup, state: State) -> None:
    """The sizes with a bool param flipped, the work counted (memory and iterations too)."""
    flips = flipped(setup.sk, state.sizes, setup.steps, setup.base)
    records = count_work(setup, flips, state.runner) if flips else []
    state.switched += [Measured(r, s.held_out) for s, r in zip(flips, records, strict=True)]


#: The steps after the ladder, in order; the proposals are fitted once at the end (and inside
#: ``recheck``, which needs the time's verdict).
EXTEND = (extend_steps, count, recheck, flip)


def infer(
    factory: Factory,
    skeleton: str,
    *,
    base: Point | None = None,
    call_kwargs: Callable[[int], Mapping[str, object]] | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    header: str = "",
    max_sizes: int = DEFAULT_SIZES,
) -> Inference:
    """Measure ``factory(seed)``'s pipeline around ``base`` (default: the cheapest admissible
    size) on a ladder of ``max_sizes`` sizes at most and draft the rest of ``skeleton``: plan,
    measure, extend, fit."""
    name = _name(skeleton)
    sk = load(skeleton, name, "<skeleton>")
    point = base_point(sk, name, base)
    steps = steps_param(sk)
    with quiet_libraries(), torch_threads("cpu", 1):
        (progress or (lambda step, total, what: None))(0, 1, "discovering the stages")
        found = discover(factory, skeleton, name, point, steps, seed=seed, call_kwargs=call_kwargs)
        formulas = measuring_formulas(skeleton, name, found.stages)
        setup = Setup(
            factory, skeleton, name, sk, formulas, found, point, steps, seed, call_kwargs, max_sizes
        )
        sizes = plan(formulas, point, most=max_sizes)
        total = most_runs(setup, sizes)
        runner = Runner(
            factory, formulas, seed=seed, call_kwargs=call_kwargs, progress=progress, total=total
        )
        state = State(runner, list(sizes))
        measure_ladder(setup, state)
        for step in EXTEND:
            step(setup, state)
        state.proposals = fit(setup, state)
    return _inference(setup, state, draft_text(skeleton, state.proposals, header))


def _inference(setup: Setup, state: State, draft: str) -> Inference:
    return Inference(
        setup.name,
        setup.base,
        setup.found.ran,
        tuple(state.sizes),
        tuple(state.measured),
        tuple(state.proposals),
        draft,
        tuple(setup.found.stages),
        tuple(state.repeats),
        tuple(state.work),
        tuple(state.switched),
        dict(setup.sk.default_workload),
    )


def most_runs(setup: Setup, sizes: Sequence[Size]) -> int:
    """The most runs the inference makes after discovery, known before the first: the ladder
    with its second part, counted and flipped, the base's repeats and the rechecks (the
    progress's total: an upper bound that never grows; the second part and the rechecks run
    only where the fits ask for them)."""
    more = (
        steps_across(setup.formulas, setup.base, sizes, setup.most)
        if setup.steps is not None
        else []
    )
    every = planned(setup.sk, [*sizes, *more], setup.steps, setup.base)
    return every + BASE_REPEATS - 1 + RECHECKS


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
    setup: Setup, sizes: Sequence[Size], timed: Runner, what: str | None = None
) -> list[WarmupRecord]:
    """The ladder's sizes again on a fresh pipeline, the work counted (the same in every run):
    what the time terms are chosen from; the progress goes on from ``timed``'s."""
    counter = Runner(
        setup.factory,
        setup.formulas,
        seed=setup.seed,
        call_kwargs=setup.call_kwargs,
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
