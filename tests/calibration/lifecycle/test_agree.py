"""How ranks agree (``calibration.lifecycle.agree``): two gloo processes exchange their phase
bounds, every shared phase takes the largest, a phase only one rank has stays its own; a rank's
unreadable bounds are refused; a single process agrees with itself."""

from __future__ import annotations

import json
import socket
import time

import pytest

from calibration.lifecycle.agree import RankMismatchError, cautious_bounds, gather_text, read_bounds
from calibration.plan.model import Phase, Target
from runtime.measure.distributed import LOCAL
from tests.calibration.lifecycle import _ranks_worker

mp = pytest.importorskip("torch.multiprocessing")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_take_the_largest_bound_of_each_phase_they_share(tmp_path):
    context = mp.spawn(
        _ranks_worker.bounds_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=False
    )
    deadline = time.monotonic() + 600  # a hang guard, not a performance bound (a loaded 2-core CI)
    while not context.join(timeout=1):
        assert time.monotonic() < deadline, "ranks did not finish"
    zero, one = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    assert zero["bounds"] == {"a": 10, "b": 5}  # "a" is rank 0's own largest already
    assert one["bounds"] == {"a": 10, "c": 3}  # rank 0's larger "a"; "c" is rank 1's alone
    assert zero["texts"] == one["texts"] == ["x", "xx"]  # in rank order, padding stripped
    assert zero["failure"] == one["failure"] == "slower"  # any rank's failure fails all


def test_one_process_agrees_with_itself():
    target = Target("t", (Phase("a", 4, ("vae",)),))
    assert cautious_bounds(LOCAL, [target], "cpu/cpu/1") == (target,)
    assert gather_text(LOCAL, "{}") == ["{}"]


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"t": {"a": 1}}',  # no device kind
        '{"kind": 1, "bounds": {"t": {"a": 1}}}',
        '{"kind": "cpu", "bounds": {"t": {"a": -1}}}',
        '{"kind": "cpu", "bounds": {"t": {"a": true}}}',
    ],
)
def test_unreadable_bounds_from_a_rank_are_refused(text):
    with pytest.raises(RankMismatchError, match="cannot be read"):
        read_bounds(text)


def test_planning_inputs_go_through_text_unchanged():
    from calibration.lifecycle import exchange
    from calibration.lifecycle.steps import plan_inputs
    from calibration.plan.model import Device
    from tests.calibration.lifecycle_setup import calibration

    components, targets = plan_inputs(calibration())
    device = Device(1 << 20, reserve_bytes=0, pin_budget_bytes=1 << 19)
    back = exchange.loads(exchange.dumps(components, targets, device))
    assert back == (components, targets, device)
    assert [dict(t.uses) for t in back[1]] == [dict(t.uses) for t in targets]  # not in ==
    assert [dict(t.layer_uses) for t in back[1]] == [dict(t.layer_uses) for t in targets]
    assert [dict(t.stage_seconds) for t in back[1]] == [dict(t.stage_seconds) for t in targets]


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"components": [["vae", -1, [], []]], "targets": [], "device": [1, 0, null, 1.0, 2.0]}',
        '{"components": [["vae", true, [], []]], "targets": [], "device": [1, 0, null, 1.0, 2.0]}',
        '{"components": [], "targets": [], "device": [1, 0]}',
        '{"components": [], "targets": [{"name": "t"}], "device": [1, 0, null, 1.0, 2.0]}',
    ],
)
def test_unreadable_planning_inputs_are_refused(text):
    from calibration.lifecycle import exchange

    with pytest.raises((TypeError, ValueError, KeyError)):
        exchange.loads(text)
