"""Ranks never hang: each lifecycle step faulted on one of two gloo ranks in turn (a component's
``.to()`` failing or interrupted, an out-of-memory error or another error in the request, an
interrupt, a rollback that fails, a rank stalled past the timeout, the re-warm failing or
interrupted); both ranks end in the same state, within the processes' join bound
(``run_ranks``), never the gloo group's own 10-minute timeout."""

from __future__ import annotations

import json

import pytest

from calibration.lifecycle.model import NO_PLAN_VALIDATES, OK, REFUSED, ROLLBACK_FAILED
from tests.calibration.lifecycle import _faults_worker
from tests.calibration.lifecycle_setup import hand_over, run_ranks

pytest.importorskip("torch.multiprocessing")
pytest.importorskip("accelerate")

#: Each step's fault, the rank it strikes, and the status both ranks end with.
CASES = [
    ("apply: out of memory", 1, "apply", OK),
    ("apply: an error", 0, "apply", OK),
    ("apply: interrupted", 0, "apply", REFUSED),
    ("request: out of memory", 0, "apply", OK),
    ("request: an error", 1, "apply", OK),
    ("rollback fails", 1, "apply", ROLLBACK_FAILED),
    ("request: interrupted", 0, "apply", REFUSED),
    ("rank late", 1, "apply", NO_PLAN_VALIDATES),
    ("rank late", 0, "strict", REFUSED),
    ("re-warm: out of memory", 0, "apply", NO_PLAN_VALIDATES),
    ("re-warm: out of memory", 1, "strict", REFUSED),
    ("re-warm: interrupted", 1, "apply", REFUSED),
]


@pytest.mark.parametrize(("step", "rank", "mode", "status"), CASES)
def test_both_ranks_end_in_the_same_state(tmp_path, step, rank, mode, status):
    (tmp_path / "scenario.json").write_text(json.dumps({"step": step, "rank": rank, "mode": mode}))
    hand_over(tmp_path)
    ranks = run_ranks(_faults_worker.worker, tmp_path, 300)
    faulted, other = ranks[rank], ranks[1 - rank]
    if step.endswith("interrupted"):  # the interrupted rank raised, with nothing left applied
        assert faulted == {"interrupted": True, "hooked": []}
        assert other["status"] == status and not other["serving"] and other["hooked"] == []
        return
    if step == "rollback fails":  # only the rank whose hook stuck keeps it; neither serves
        assert faulted["hooked"] == ["transformer"] and other["hooked"] == []
        faulted.pop("hooked"), other.pop("hooked")
        faulted["steps"], other["steps"] = faulted["steps"][:-1], other["steps"][:-1]
    assert faulted["status"] == other["status"] == status
    assert faulted["serving"] == other["serving"] == (status in (OK, NO_PLAN_VALIDATES))
    assert faulted["placement"] == other["placement"]
    assert bool(faulted["placement"]) == faulted["serving"]
    if step != "rollback fails":  # the same steps (a rank whose apply failed has nothing to undo)
        assert _without_rollback(faulted["steps"]) == _without_rollback(other["steps"])
    if step.startswith("re-warm"):  # one rank's re-warm failed: both rolled back, alike
        assert faulted["steps"] == other["steps"]
        assert faulted["steps"][faulted["steps"].index("re-warm") + 1] == "rollback"


def _without_rollback(steps):
    return [s for s in steps if s != "rollback"]
