"""Two ranks on gloo with different injected outcomes end on the same, most cautious placement."""

from __future__ import annotations

import json
import socket
import time

import pytest

from calibration.lifecycle.faults import Fault
from tests.calibration import _lifecycle_worker
from tests.calibration.lifecycle_setup import lifecycle

mp = pytest.importorskip("torch.multiprocessing")
pytest.importorskip("accelerate")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_end_on_the_same_most_cautious_placement(tmp_path):
    context = mp.spawn(
        _lifecycle_worker.worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=False
    )
    deadline = time.monotonic() + 300  # a hang guard, not a performance bound
    while not context.join(timeout=1):
        assert time.monotonic() < deadline, "ranks did not finish"
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]

    oom = [r["oom on rank 1"] for r in ranks]
    assert oom[0] == oom[1]  # rank 0 held alone, yet rolled back with rank 1
    assert oom[0]["validations"] == ["out-of-memory", "holds"] and oom[0]["status"] == 0
    alone, _ = lifecycle([Fault("DenoisingStage", times=1)])  # rank 1's outcome on its own
    assert oom[0]["placement"] == dict(alone.report.placement)
    unfaulted, _ = lifecycle()
    assert oom[0]["placement"] != dict(unfaulted.report.placement)  # not rank 0's own choice

    peak = [r["peak on rank 0"] for r in ranks]
    assert peak[0] == peak[1]
    assert peak[0]["validations"] == ["over-bound", "holds"]
