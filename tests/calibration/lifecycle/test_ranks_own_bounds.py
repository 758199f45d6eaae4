"""Each rank planned on its own bounds (issue 39, item 6): ranks agree on the most cautious bound of
a phase only with ranks of the same kind of device (``agree.device_kind``: device type, model and
capacity); the peer's 20 GiB and 100 GiB ranks (scaled to KiB, on two gloo processes), whose
activations differ, are each planned on their own measurements, and both are placed."""

from __future__ import annotations

import pytest

from calibration.lifecycle.agree import agreed_bounds, device_kind
from calibration.plan.model import Device, Phase, Target
from calibration.plan.ranks import RankInputs, solve_ranks
from tests.calibration.lifecycle import _ranks_worker
from tests.calibration.lifecycle_setup import run_ranks

pytest.importorskip("torch.multiprocessing")

MINE = Target("t", (Phase("a", 10), Phase("b", 5)))


def _bounds(**phases: int) -> dict[str, dict[str, int]]:
    return {"t": dict(phases)}


def test_ranks_of_the_same_kind_take_the_largest_bound_of_each_phase():
    ranks = [("cpu/cpu/20", _bounds(a=10, b=5)), ("cpu/cpu/20", _bounds(a=12, c=3))]
    (agreed,) = agreed_bounds("cpu/cpu/20", [MINE], ranks)
    assert {p.label: p.bound_bytes for p in agreed.phases} == {"a": 12, "b": 5}


def test_ranks_of_another_kind_are_not_consulted():
    ranks = [("cpu/cpu/20", _bounds(a=10, b=5)), ("cpu/cpu/100", _bounds(a=40, b=50))]
    assert agreed_bounds("cpu/cpu/20", [MINE], ranks) == (MINE,)
    # among three ranks, only the one of this kind counts
    ranks.append(("cpu/cpu/20", _bounds(a=11)))
    (agreed,) = agreed_bounds("cpu/cpu/20", [MINE], ranks)
    assert {p.label: p.bound_bytes for p in agreed.phases} == {"a": 11, "b": 5}


def test_a_rank_alone_keeps_its_own_bounds():
    assert agreed_bounds("cpu/cpu/20", [MINE], [("cpu/cpu/20", _bounds(a=10, b=5))]) == (MINE,)


def test_the_device_kind_is_its_type_model_and_capacity():
    small, large = Device(20 << 10, reserve_bytes=0), Device(100 << 10, reserve_bytes=0)
    assert device_kind("cpu", small) == "cpu/cpu/20480"
    assert device_kind("cpu", small) != device_kind("cpu", large)
    assert device_kind("cpu", small) == device_kind("cpu", Device(20 << 10, reserve_bytes=1))


def test_merging_across_kinds_would_leave_the_small_rank_nothing():
    """Why the rule: the large rank's activations on the small rank fit nothing there."""
    ranks = [RankInputs(*_ranks_worker.own_inputs(r)) for r in range(2)]  # type: ignore[arg-type]
    assert solve_ranks(ranks).feasible
    big = ranks[1].targets[0]
    merged = RankInputs(ranks[0].components, [big], ranks[0].device)
    assert not solve_ranks([merged, ranks[1]]).feasible


def test_two_ranks_of_different_devices_are_each_placed_on_their_own_bounds(tmp_path):
    small, large = run_ranks(_ranks_worker.own_bounds_worker, tmp_path, 120)

    for rank, (capacity, activations) in zip((small, large), _ranks_worker.OWN):
        assert rank["feasible"], rank["reason"]
        assert rank["usable"] == capacity
        assert rank["bounds"]["denoise"] == activations  # its own, not the other rank's
        assert all(h >= 0 for h in rank["headroom"])
        assert rank["agreed"].split(":")[0] in ("common", "per-rank")
