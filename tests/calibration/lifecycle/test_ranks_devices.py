"""Two gloo ranks in separate processes with different device caps (1 MiB and 64 MiB, no reserve):
each plans from its own bounds (devices of different capacities are different kinds: no bound is
taken from the other rank) and every rank's inputs, each gets a placement checked against its own
device (here one placement fits both); rank 1's pipeline has a component rank 0 lacks (an image
encoder), and it is planned there rather than refused (``_ranks_worker`` runs each rank)."""

from __future__ import annotations

import pytest

from tests.calibration.lifecycle import _ranks_worker
from tests.calibration.lifecycle_setup import run_ranks

pytest.importorskip("torch.multiprocessing")
pytest.importorskip("accelerate")


def test_ranks_with_different_caps_each_get_a_plan_that_fits(tmp_path):
    small, large = run_ranks(_ranks_worker.worker, tmp_path, 400)

    for rank, cap in zip((small, large), _ranks_worker.CAPS):
        assert rank["usable"] == cap  # each rank planned against its own device
        assert rank["status"] == 0 and rank["validations"] == ["holds"]
        for _label, bound, weights, headroom in rank["phases"]:
            assert bound + weights + headroom == cap and headroom >= 0  # fits that device
        assert all(p["measured_bytes"] <= cap for p in rank["measured"] if p["measured_bytes"])
    assert small["placement"]["transformer"].startswith("layerwise")  # 1 MiB must stream
    # one placement fits both (the planner's solve_ranks prefers it), each on its own device
    for rank in (small, large):
        assert rank["plan"].startswith("the estimates (common: one placement fits every rank (2))")
    shared = {n: p for n, p in large["placement"].items() if n != "image_encoder"}
    assert shared == small["placement"]
    assert "image_encoder" in large["placement"] and "image_encoder" not in small["placement"]
    # the same FLUX measured alike on both: its own bounds are the same on each rank
    bounds = [{label: bound for label, bound, _, _ in r["phases"]} for r in (small, large)]
    shared = set(bounds[0]) & set(bounds[1])
    assert shared and all(bounds[0][label] == bounds[1][label] for label in shared)
