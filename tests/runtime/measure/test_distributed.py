"""Ranks agree, for real: two processes on gloo over localhost."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import torch.multiprocessing as mp

from runtime.measure import LOCAL, agree_lighten_steps, reduce_record
from runtime.record import WarmupRecord
from tests.runtime.measure import _dist_worker

F32 = 4
DATA = Path(__file__).parent / "data"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_agree_on_gloo(tmp_path):
    context = mp.spawn(
        _dist_worker.worker,
        args=(2, _free_port(), str(tmp_path), str(DATA / "wan_tiny.json")),
        nprocs=2,
        join=False,
    )
    deadline = time.monotonic() + 600  # a hang guard, not a performance bound (a loaded 2-core CI)
    while not context.join(timeout=1):
        assert time.monotonic() < deadline, "ranks did not finish"
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]

    assert [r["steps"] for r in results] == [2, 2]  # MAX of 1 and 2: the most cautious shrink
    assert [r["probe"] for r in results] == [
        [True, 1, 2],
        [True, 1, 2],
    ]  # rank 1's OOM made both go lighter

    local = [WarmupRecord.from_json(r["local"]) for r in results]
    reduced = [WarmupRecord.from_json(r["reduced"]) for r in results]
    assert reduced[0] == reduced[1]
    text = [{p.name: p for p in rec.phases}["TextEncodingStage"] for rec in (*local, reduced[0])]
    denoise = [{p.name: p for p in rec.phases}["DenoisingStage"] for rec in (*local, reduced[0])]
    assert [p.peak_allocated for p in text] == [1000 * F32, 500 * F32, 1000 * F32]
    assert [p.peak_allocated for p in denoise] == [1000 * F32, 2000 * F32, 2000 * F32]
    assert [i.peak_allocated for i in reduced[0].iterations] == [2000 * F32, 2000 * F32]
    assert reduced[0].peak_allocated == 2000 * F32
    assert reduced[0].duration_s == max(r.duration_s for r in local)


def test_without_a_process_group_nothing_changes():
    record = WarmupRecord("p", "cpu", "b", {}, None, 0, 1, 1, 0.0)
    assert reduce_record(record) is record
    assert agree_lighten_steps(3) == 3 and LOCAL.max_int(5) == 5
