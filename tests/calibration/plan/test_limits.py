"""The planner's cost is bounded for any input (issue 23): counts past their limits are refused
before a candidate is built, the search keeps no recursion per component, and its budget counts
work, not only nodes. Each test bounds work or memory, never the wall clock (bench/plan.py times
the same hostile shapes)."""

from __future__ import annotations

import inspect
import random
import sys
import tracemalloc

import pytest

from artifact.limits import (
    MAX_PLAN_COMPONENTS,
    MAX_PLAN_GROUPS,
    MAX_PLAN_LAYERS,
    MAX_PLAN_PAIRS,
    MAX_PLAN_TARGETS,
    MAX_SEARCH_WORK,
)
from calibration.plan import Component, Device, GiB, Phase, PlanLimitError, Target, solve
from tests.budget import count_calls

MiB = 1 << 20


def one_phase(n: int) -> tuple[list[Component], list[Target]]:
    """``n`` components of a few MiB, all active in one phase."""
    rng = random.Random(n)
    comps = [Component(f"c{i}", rng.randint(1, 100) * MiB) for i in range(n)]
    return comps, [Target("t", [Phase("all", GiB, [c.name for c in comps])])]


def peak_mib(work):
    """Run ``work`` under tracemalloc; its result (or exception) and the peak in MiB."""
    tracemalloc.start()
    try:
        try:
            result: object = work()
        except PlanLimitError as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1] / MiB
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("n", [1000, 3000])
def test_more_components_than_the_limit_are_refused_before_any_work(n):
    comps, targets = one_phase(n)
    (error, calls) = count_calls(lambda: peak_mib(lambda: solve(comps, targets, Device(64 * GiB))))
    result, peak = error
    assert isinstance(result, PlanLimitError)
    assert "MAX_PLAN_COMPONENTS" in str(result) and "plan fewer components" in str(result)
    assert peak < 1 and calls < 100  # nothing built: no candidate, no search


def test_components_at_the_limit_solve_without_recursion_per_component():
    comps, targets = one_phase(MAX_PLAN_COMPONENTS)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 60)  # far fewer frames than components
    try:
        plan, peak = peak_mib(lambda: solve(comps, targets, Device(64 * GiB)))
    finally:
        sys.setrecursionlimit(limit)
    assert not isinstance(plan, PlanLimitError) and plan.feasible
    assert peak < 256


def uneven(n: int, layers: int) -> tuple[list[Component], list[Target]]:
    """``n`` components of ``layers`` uneven layers with uneven uses, one phase each."""
    rng = random.Random(23)
    comps, uses = [], {}
    for i in range(n):
        sizes = [rng.randint(1, 64) * MiB for _ in range(layers)]
        comps.append(Component(f"c{i}", sum(sizes) + rng.randint(0, 64) * MiB, sizes))
        uses[f"c{i}"] = tuple(rng.randint(1, 100) for _ in range(layers))
    phases = [Phase(f"p{i}", rng.randint(0, 8) * GiB, [f"c{i}"]) for i in range(n)]
    return comps, [Target("t", phases, layer_uses=uses)]


def test_the_search_budget_counts_work_not_only_nodes():
    """120 components x 30 uneven layers visited 12 % of the node limit in 18 s: the work per
    node (options scanned, bounds built) now counts, and past the budget the error says so."""
    comps, targets = uneven(120, 30)
    budget = 1 << 21
    (result, peak), calls = count_calls(
        lambda: peak_mib(lambda: solve(comps, targets, Device(48 * GiB), work_limit=budget))
    )
    # stopped before the search found a placement: the greedy pass's, unproven (issue 33)
    assert not isinstance(result, PlanLimitError) and result.feasible and not result.proven
    assert result.stopped_by == "MAX_SEARCH_WORK" and "MAX_SEARCH_WORK" in result.reason
    assert fits_everywhere(result, comps, targets, Device(48 * GiB))
    assert 0 <= result.lower_bound_bytes <= result.transfer_bytes
    assert peak < 64
    assert calls < budget  # the Python calls made stay within the work counted


def test_shared_phases_end_within_the_work_budget():
    """20 components x 100 uneven layers in phases shared by three each: many ceilings, each a
    dive; solved or refused within the work budget."""
    comps, (target,) = uneven(20, 100)
    shared = [
        Phase(f"p{i}", (i % 20) * GiB, [f"c{i}", f"c{(i + 1) % 20}", f"c{(i + 7) % 20}"])
        for i in range(20)
    ]
    target = Target("t", shared, layer_uses=target.layer_uses)
    budget = 1 << 21
    (result, peak), calls = count_calls(
        lambda: peak_mib(lambda: solve(comps, [target], Device(80 * GiB), work_limit=budget))
    )
    assert isinstance(result, PlanLimitError) or result.feasible in (True, False)
    assert peak < 128
    assert calls < budget


@pytest.mark.parametrize(
    ("limit", "components", "targets"),
    [
        (
            "MAX_PLAN_LAYERS",
            [Component.uniform("big", MAX_PLAN_LAYERS + 1, MAX_PLAN_LAYERS + 1, 1)],
            [Target("t", [Phase("p", 0, ["big"])])],
        ),
        (
            "MAX_PLAN_TARGETS",
            [Component("a", 1)],
            [Target(f"t{i}", [Phase("p", 0, ["a"])]) for i in range(MAX_PLAN_TARGETS + 1)],
        ),
        (
            "MAX_PLAN_PAIRS",
            [Component(f"c{i}", 1) for i in range(200)],
            [Target(f"t{i}", [Phase(f"p{k}", 0) for k in range(16)]) for i in range(400)],
        ),
        (
            "MAX_PLAN_GROUPS",
            [Component(f"c{i}", 1) for i in range(12)],
            [
                Target(
                    "t",
                    [
                        Phase(f"p{m}", 0, [f"c{i}" for i in range(12) if m >> i & 1])
                        for m in range(MAX_PLAN_GROUPS + 1)
                    ],
                )
            ],
        ),
    ],
)
def test_each_count_past_its_limit_is_a_typed_error_naming_it(limit, components, targets):
    assert MAX_PLAN_PAIRS < 200 * 16 * 400
    with pytest.raises(PlanLimitError, match=limit):
        solve(components, targets, Device(GiB))


def ring() -> tuple[list[Component], list[Target], Device]:
    """Six components of uneven layers in a ring of shared phases: thousands of nodes to prove."""
    rng = random.Random(7)
    comps, uses, phases = [], {}, []
    for i in range(6):
        sizes = [rng.randint(2, 9) for _ in range(8)]
        comps.append(Component(f"c{i}", sum(sizes), sizes))
        uses[f"c{i}"] = tuple(rng.randint(1, 9) for _ in range(8))
        phases.append(Phase(f"p{i}", rng.randint(0, 6), [f"c{i}", f"c{(i + 1) % 6}"]))
    device = Device(sum(c.weight_bytes for c in comps) // 2, reserve_bytes=0)
    return comps, [Target("t", phases, layer_uses=uses)], device


def fits_everywhere(plan, comps, targets, device) -> bool:
    """Every phase, from the placements alone: kept bytes + the active ones' onloads + the bound
    within the usable bytes, each layer set a subset of the component's, the pin budget held."""
    by_name = {p.component: p for p in plan.placements}
    kept = sum(p.device_bytes for p in plan.placements)
    for c in comps:
        p = by_name[c.name]
        assert set(p.resident_layers) <= set(range(len(c.layer_bytes)))
        assert p.device_bytes + p.onload_bytes <= c.weight_bytes
    if device.pin_budget_bytes is not None:
        assert sum(c.weight_bytes for c in comps) - kept <= device.pin_budget_bytes
    return all(
        kept
        + sum(by_name[n].onload_bytes for n in set(phase.active_components))
        + phase.bound_bytes
        <= device.usable_bytes
        for t in targets
        for phase in t.phases
    )


def test_a_stopped_search_with_an_incumbent_returns_it_checked_and_marked_unproven():
    """Past its node or work limit, the search keeps the best placement it found: a plan that
    fits every phase (checked as any plan), not proven the least, with the limit that stopped it
    and a lower bound no greater than the true least."""
    comps, targets, device = ring()
    best = solve(comps, targets, device)
    assert best.proven and best.stopped_by is None
    assert best.lower_bound_bytes == best.transfer_bytes and best.nodes > 1000
    unproven = 0
    for limit in range(20, best.nodes, 97):
        try:
            plan = solve(comps, targets, device, search_limit=limit)
        except PlanLimitError as exc:  # nothing that fits found yet
            assert "MAX_SEARCH_NODES" in str(exc) and "found no placement that fits" in str(exc)
            continue
        assert plan.feasible and fits_everywhere(plan, comps, targets, device)
        assert all(u.headroom_bytes >= 0 for u in plan.phases)
        assert plan.lower_bound_bytes is not None
        assert plan.lower_bound_bytes <= best.transfer_bytes <= plan.transfer_bytes
        if not plan.proven:
            unproven += 1
            assert plan.stopped_by == "MAX_SEARCH_NODES"
            assert plan.reason.startswith("fits, not proven the least transfer:")
            assert "MAX_SEARCH_NODES" in plan.reason
    assert unproven > 10
    for work in (1 << 17, 3 << 16, 1 << 18):
        plan = solve(comps, targets, device, work_limit=work)
        assert not plan.proven and plan.stopped_by == "MAX_SEARCH_WORK"
        assert fits_everywhere(plan, comps, targets, device)
        assert plan.lower_bound_bytes <= best.transfer_bytes <= plan.transfer_bytes


def test_a_stopped_search_takes_the_greedy_placement_when_it_found_none():
    """The ring stopped after 20 nodes has no incumbent: the greedy pass's placement fits, is
    marked unproven, and the search's lower bound stays below the true least."""
    comps, targets, device = ring()
    best = solve(comps, targets, device)
    plan = solve(comps, targets, device, search_limit=20)
    assert plan.feasible and not plan.proven and plan.stopped_by == "MAX_SEARCH_NODES"
    assert fits_everywhere(plan, comps, targets, device)
    assert plan.lower_bound_bytes <= best.transfer_bytes <= plan.transfer_bytes


def test_a_stopped_search_refuses_when_the_greedy_pass_finds_nothing_either():
    """The greedy pass starts from each component's smallest footprint where it runs: streaming
    a's two layers keeps 8 B on the device, and b's phase then overflows; only a offloaded whole
    fits, which a search stopped at once never reaches."""
    comps = [Component("a", 10, (1, 1)), Component("b", 5)]
    targets = [Target("t", [Phase("pa", 0, ["a"]), Phase("pb", 0, ["b"])])]
    device = Device(10, reserve_bytes=0)
    assert solve(comps, targets, device).placement("a").kind == "offloaded"
    with pytest.raises(PlanLimitError, match="found no placement that fits") as caught:
        solve(comps, targets, device, work_limit=1)
    assert "nor did a greedy pass" in str(caught.value)
    assert "MAX_SEARCH_WORK" in str(caught.value) and "group equal layers" in str(caught.value)


def test_the_report_says_a_plan_is_unproven():
    from calibration.plan.report import document

    comps, targets, device = ring()
    proven = document(solve(comps, targets, device), comps)
    assert proven["proven"] is True and proven["stopped_by"] is None
    assert proven["lower_bound_bytes"] == proven["transfer_bytes"]
    doc = document(solve(comps, targets, device, work_limit=1 << 17), comps)
    assert doc["feasible"] is True and doc["proven"] is False
    assert doc["stopped_by"] == "MAX_SEARCH_WORK" and "MAX_SEARCH_WORK" in doc["reason"]
    assert 0 <= doc["lower_bound_bytes"] <= doc["transfer_bytes"]


def test_the_bench_instance_the_work_limit_must_not_refuse_is_planned():
    """Uneven layers of 120 components (bench/plan.py's hostile shape): past the default work
    limit the incumbent is returned, not refused, within the counted budget."""
    comps, targets = uneven(120, 30)
    (plan, peak), calls = count_calls(
        lambda: peak_mib(lambda: solve(comps, targets, Device(48 * GiB)))
    )
    assert not isinstance(plan, PlanLimitError) and plan.feasible
    assert fits_everywhere(plan, comps, targets, Device(48 * GiB))
    assert peak < 128 and calls < MAX_SEARCH_WORK


def test_the_greedy_placement_of_the_bench_instance_is_near_the_least():
    """Stopped at a quarter of the search's default work, before any placement was found, the
    greedy pass's placement moves within 5 % of the least any placement could (the bound a full
    default search leaves); every move it keeps fits, so it fits."""
    comps, targets = uneven(120, 30)
    device = Device(48 * GiB)
    full = solve(comps, targets, device)
    stopped = solve(comps, targets, device, work_limit=1 << 20)
    assert stopped.nodes == 0 and not stopped.proven  # the search found nothing itself
    assert fits_everywhere(stopped, comps, targets, device)
    assert full.lower_bound_bytes <= stopped.transfer_bytes <= 1.05 * full.lower_bound_bytes
