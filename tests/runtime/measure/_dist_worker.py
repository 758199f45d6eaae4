"""One rank of the two-process gloo test (a module of its own so spawned children can import it)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.gloo import gloo_rank

F32 = 4


def worker(rank: int, world: int, port: int, out_dir: str, artifact: str) -> None:
    """Record a rank-dependent request, reduce it, agree on shrinking and on a probe; write the
    results.
    """
    with gloo_rank(rank, world, port, 60):
        from calibration.calibrate.warmup import run_probe
        from runtime import load_formulas
        from runtime.measure import (
            TorchDistributedAgreement,
            WarmupRecorder,
            agree_lighten_steps,
            reduce_record,
        )

        wan = load_formulas(artifact)["wan2_1_t2v_14b"]
        recorder = WarmupRecorder(wan, device="cpu")
        with recorder.request(steps=2) as req:
            with req.stage("TextEncodingStage"):
                text = torch.zeros((2 - rank) * 500)  # rank 0 peaks here
                del text
            with req.stage("DenoisingStage"):
                for _ in range(2):
                    with req.iteration():
                        step = torch.zeros((rank + 1) * 1000)  # rank 1 peaks here
                        del step
        local = recorder.records[-1]
        reduced = reduce_record(local)

        def body(req) -> None:  # rank 1 runs out of memory at the first shape only
            if rank == 1 and req.params["frames"] == 9:
                raise torch.OutOfMemoryError("CUDA out of memory")

        shapes = [{"steps": 1, "frames": 9}, {"steps": 1, "frames": 5}]
        outcome = run_probe(recorder, shapes, body, agreement=TorchDistributedAgreement())
        result = {
            "local": local.to_json(),
            "reduced": reduced.to_json(),
            "steps": agree_lighten_steps(rank + 1),
            "probe": [outcome.calibrated, outcome.lighten_steps, len(outcome.attempts)],
        }
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
