"""Ranks plan each against its own device (issue 31, item 3), purely: no processes here (the
lifecycle's gloo agreement calls the same function on every rank)."""

from __future__ import annotations

import pytest

from calibration.plan import Component, Device, GiB, Phase, PlanInputError, Target, solve
from calibration.plan.ranks import Agreement, RankInputs, solve_ranks

#: a transformer of 12 GiB rest + 48 blocks of 1 GiB, and a 1 GiB VAE
TRANSFORMER = Component.uniform("transformer", 60 * GiB, 48, GiB)
VAE = Component("vae", GiB)


def rank(capacity: int, decode_bound: int, *extra: Component) -> RankInputs:
    """One rank: denoise (4 GiB of activations) and decode (``decode_bound``), on its device."""
    phases = [
        Phase("denoise", 4 * GiB, ["transformer"]),
        Phase("decode", decode_bound, ["vae"]),
        *(Phase(f"run {c.name}", 0, [c.name]) for c in extra),
    ]
    target = Target("steps=50", phases, layer_uses={"transformer": (50,) * 48})
    return RankInputs([TRANSFORMER, VAE, *extra], [target], Device(capacity, reserve_bytes=0))


def fits(plan, inputs: RankInputs) -> bool:
    """Every phase of the rank within its own device, from the placements alone."""
    by_name = {p.component: p for p in plan.placements}
    kept = sum(p.device_bytes for p in plan.placements)
    return {p.component for p in plan.placements} == {c.name for c in inputs.components} and all(
        kept + sum(by_name[n].onload_bytes for n in set(ph.active_components)) + ph.bound_bytes
        <= inputs.device.usable_bytes
        for t in inputs.targets
        for ph in t.phases
    )


def test_a_40_and_a_140_gib_rank_get_their_own_plans_when_no_shared_one_fits():
    """The 40 GiB rank cannot onload the 60 GiB transformer whole: it must stream it, keeping its
    12 GiB rest. The 140 GiB rank decodes with 130 GiB of activations: beside the VAE, only 9 GiB
    stay free, so the transformer's rest cannot stay: it must be offloaded whole. No one
    placement does both; each rank fits with its own."""
    small, big = rank(40 * GiB, 2 * GiB), rank(140 * GiB, 130 * GiB)
    # the old way, the smallest device against the largest bounds, fits nothing
    cautious = rank(40 * GiB, 130 * GiB)
    assert not solve(cautious.components, cautious.targets, cautious.device).feasible
    planned = solve_ranks([small, big])
    assert planned.agreement == Agreement.PER_RANK and planned.feasible
    first, second = planned.plans
    assert first.placement("transformer").kind == "layerwise"
    assert second.placement("transformer").kind == "offloaded"
    assert fits(first, small) and fits(second, big)
    assert first.device.capacity_bytes == 40 * GiB and second.device.capacity_bytes == 140 * GiB
    # each rank's own optimum, as it would plan alone
    assert (
        first.transfer_bytes == solve(small.components, small.targets, small.device).transfer_bytes
    )
    assert second.transfer_bytes == solve(big.components, big.targets, big.device).transfer_bytes


def test_ranks_that_can_share_a_placement_share_it_and_a_component_on_one_rank_is_planned():
    """Both ranks decode small: one placement fits both, and a 3 GiB refiner that only the
    140 GiB rank holds is planned there (and kept room for on the other: cautious)."""
    refiner = Component("refiner", 3 * GiB)
    small, big = rank(40 * GiB, 2 * GiB), rank(140 * GiB, 2 * GiB, refiner)
    planned = solve_ranks([small, big])
    assert planned.agreement == Agreement.COMMON
    first, second = planned.plans
    assert [p.component for p in first.placements] == ["transformer", "vae"]
    assert [p.component for p in second.placements] == ["transformer", "vae", "refiner"]
    assert second.placement("refiner").kind in ("resident", "offloaded")
    for name in ("transformer", "vae"):
        a, b = first.placement(name), second.placement(name)
        assert (a.kind, a.resident_layers) == (b.kind, b.resident_layers)
    assert fits(first, small) and fits(second, big)
    # the shared placement is sized for the small rank, with the refiner's room kept there too
    kept = sum(p.device_bytes for p in second.placements)
    assert kept + GiB + 4 * GiB <= 40 * GiB


def test_a_rank_that_fits_nothing_says_which():
    small, big = rank(40 * GiB, 39 * GiB + 1), rank(140 * GiB, 2 * GiB)
    planned = solve_ranks([small, big])
    assert planned.agreement == Agreement.NONE and not planned.feasible
    assert planned.reason.startswith("rank 0: phase steps=50/decode needs")
    assert planned.plans[1].feasible


def test_no_rank_is_an_input_error():
    with pytest.raises(PlanInputError):
        solve_ranks([])
