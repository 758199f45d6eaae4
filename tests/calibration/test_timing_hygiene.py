"""How the calibration loop keeps CPU timings comparable: the calling thread pinned to one core
while timing with one thread, and, on a real tiny Wan pipeline, every size once a round with the
target (with verify) once a round after them -- its runs never in the estimate."""

from __future__ import annotations

import os

import pytest
import torch

from calibration.calibrate.run import calibrate_session, full_point
from calibration.core.host import pinned_to_one_core, quiet_libraries, torch_threads
from calibration.core.session import Session
from calibration.examples import EXAMPLES

pytest.importorskip("diffusers")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_one_thread_on_the_cpu_runs_on_one_core_and_gets_its_cores_back():
    allowed = os.sched_getaffinity(0)
    threads = torch.get_num_threads()
    with torch_threads("cpu", 1):
        inside = os.sched_getaffinity(0)
        assert torch.get_num_threads() == 1
    assert len(inside) == 1 and inside <= allowed
    assert os.sched_getaffinity(0) == allowed and torch.get_num_threads() == threads
    with pinned_to_one_core() as core:
        assert os.sched_getaffinity(0) == {core}
    with torch_threads("cpu", 2):  # threads of their own: nothing to pin
        assert os.sched_getaffinity(0) == allowed
    with torch_threads("cuda", 1):  # the device's clock: the host thread may move
        assert os.sched_getaffinity(0) == allowed


@pytest.mark.slow
def test_the_target_is_measured_once_a_round_beside_the_sizes_that_predict_it(wan_1_3b):
    example = EXAMPLES["wan"]
    shape = {"steps": 1, "frames": 9, "cfg": False}
    warmup = full_point(wan_1_3b, {**shape, "height": 16, "width": 16}, "warmup")
    probe = full_point(wan_1_3b, {**shape, "height": 32, "width": 32}, "probe")
    target = full_point(wan_1_3b, {**shape, "steps": 4, "height": 48, "width": 48}, "target")
    with quiet_libraries():
        session = Session(example.build(0), wan_1_3b, "cpu", call_kwargs=example.call_kwargs)
        steps: list[tuple[int, int, str]] = []
        cal = calibrate_session(
            session,
            target=target,
            probe=probe,
            warmup=warmup,
            verify=True,
            repeat=2,
            time_tolerance=None,  # the sizes then depend on the formulas alone
            progress=lambda step, total, what: steps.append((step, total, what)),
        )
    sizes = [dict(r.params)["height"] for r in session.recorder.records]
    height = {"warmup": 16, "probe": 32, "re-warm": 16}
    height.update(
        {f"probe {k + 2}": p["height"] for k, p in enumerate(e.point for e in cal.extras)}
    )
    # Rounds start at the probe; each ends with the target (sizes the first round shows are
    # needed are measured at once, after its re-warm, and in every later round before it).
    starts = [i for i, role in enumerate(cal.roles) if role == "probe"]
    assert len(starts) == 2
    rounds = [cal.roles[starts[0] : starts[1]], cal.roles[starts[1] :]]
    assert sizes == [16, *(h for r in rounds for h in [*(height[x] for x in r), 48])]
    assert rounds[1][-1] == "re-warm" and set(rounds[0]) == set(rounds[1])
    assert cal.roles[:2] == ("warmup", "probe") and cal.roles[-1] == "re-warm"
    assert len(cal.target_runs) == 2 and cal.measured in cal.target_runs
    assert all(dict(r.params) != target for r in cal.records)  # the estimate never sees the target
    assert cal.estimate.timing.method != "measurement"
    # progress counts every run and then the estimate, under one total announced up front (an
    # upper bound: the run may end under it), and "done" reaches that total
    *counted, (done, total, last) = steps
    assert [s for s, _, _ in counted] == list(range(1, len(counted) + 1))
    assert {t for _, t, _ in counted} == {total}
    assert counted[-1][2] == "estimating" and counted[-1][0] <= total
    assert (done, last) == (total, "done")
