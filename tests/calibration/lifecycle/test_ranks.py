"""Two ranks on gloo with different injected outcomes end on the same, most cautious placement."""

from __future__ import annotations

import pytest

from calibration.lifecycle.faults import Fault
from tests.calibration import _lifecycle_worker
from tests.calibration.lifecycle_setup import hand_over, lifecycle, run_ranks

pytest.importorskip("torch.multiprocessing")
pytest.importorskip("accelerate")


def test_two_ranks_end_on_the_same_most_cautious_placement(tmp_path):
    hand_over(tmp_path)  # the calibration this test's own lifecycles use below, measured once
    ranks = run_ranks(_lifecycle_worker.worker, tmp_path, 300)

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

    # rank 0 alone is slow on its validation request: every rank runs the confirming request
    # (a pipeline split over the ranks runs its requests together), and the placement holds
    slow = [r["slow once on rank 0"] for r in ranks]
    assert slow[0] == slow[1]
    assert slow[0]["validations"] == ["holds"] and slow[0]["status"] == 0
    assert slow[0]["records"] == 3  # the validation, the one confirming it, the re-warm
