"""One rank of the two-process lifecycle test (its own module: spawned children import it)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from tests.gloo import gloo_rank

#: Per scenario, each rank's injected faults: (stage, kind, extra bytes, times); a peak's extra
#: bytes lie past the stage's own bound (its padding over the raw prediction added); a slow one
#: moves the rank's steady clock on by twice the request's time and spread before the plan (past
#: both of the speed check's), as a request that slow would.
SCENARIOS: dict[str, list[list[tuple[str, str, int, int | None]]]] = {
    "oom on rank 1": [[], [("DenoisingStage", "out-of-memory", 0, 1)]],
    "peak on rank 0": [[("DenoisingStage", "peak", 1000, None)], []],
    "slow once on rank 0": [[("DenoisingStage", "slow", 0, 1)], []],
}


def _padding(stage: str, kind: str) -> int:
    """A peak fault's way past the bound: the stage's bound over its raw prediction."""
    if kind != "peak":
        return 0
    from tests.calibration.lifecycle_setup import calibration

    peak = calibration().estimate.phase(f"stage:{stage}").peak
    return (peak.bound_bytes or 0) - (peak.raw_bytes or 0)


def worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """Run the lifecycle once per scenario with this rank's faults; write what each ended on."""
    with gloo_rank(rank, world, port, 120):
        from calibration.lifecycle.faults import CALL, Fault
        from calibration.lifecycle.steps import baseline
        from runtime.measure.distributed import TorchDistributedAgreement
        from tests.calibration.lifecycle_setup import Steady, calibration, lifecycle, take_over

        take_over(out_dir)
        before = baseline(calibration())
        delay = 2 * ((before.previous_s or 0.0) + before.spread_s)
        results = {}
        for name, faults in SCENARIOS.items():
            clock = Steady()
            mine = [
                Fault(stage, CALL, times=times, action=functools.partial(clock.jump, delay))
                if kind == "slow"
                else Fault(stage, kind, extra + _padding(stage, kind), times)
                for stage, kind, extra, times in faults[rank]
            ]
            outcome, _ = lifecycle(mine, agreement=TorchDistributedAgreement(), clock=clock)
            results[name] = {
                "placement": dict(outcome.report.placement),
                "validations": [s.outcome for s in outcome.report.step("validate")],
                "status": outcome.report.status,
                "records": len(outcome.records) - len(calibration().records),
            }
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(results))
