"""One rank of the two-rank fault tests (its own module: spawned children import it): the
lifecycle with one step faulted on one rank (``folder/scenario.json`` says which), on gloo, every
collective bounded by ``TIMEOUT_S``; writes where the rank ended."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

from tests.gloo import gloo_rank

#: The rank timeout the workers set (seconds): above a request's and a plan's time, far below the
#: gloo group's own (``gloo_rank``'s) and the test's join bound.
TIMEOUT_S = 20.0


def _interrupt() -> None:
    raise KeyboardInterrupt


def _faults(step: str, session) -> list:
    """``step``'s fault on this rank's pipeline (``failing_to``, or the backend's faults)."""
    import torch

    from calibration.lifecycle.faults import (
        CALL,
        ERROR,
        OUT_OF_MEMORY,
        Fault,
        failing_detach,
        failing_to,
    )

    pipe = session.pipe
    if step == "apply: out of memory":
        failing_to(pipe.text_encoder_2, lambda: torch.OutOfMemoryError("CUDA out of memory"))
    elif step == "apply: interrupted":
        failing_to(pipe.vae, KeyboardInterrupt)
    elif step == "apply: an error":
        failing_to(pipe.vae, lambda: RuntimeError("CUDA error: an illegal memory access"))
    elif step == "request: out of memory":
        return [Fault("DenoisingStage", OUT_OF_MEMORY, times=1)]
    elif step == "request: an error":
        return [Fault("DenoisingStage", ERROR, times=1)]
    elif step == "request: interrupted":
        return [Fault("DenoisingStage", CALL, times=1, action=_interrupt)]
    elif step == "rollback fails":
        stick = functools.partial(failing_detach, pipe.transformer, times=10)
        return [Fault("DenoisingStage", times=1), Fault("DenoisingStage", CALL, action=stick)]
    elif step == "re-warm: out of memory":  # the request after the validation that held
        return [Fault("DenoisingStage", OUT_OF_MEMORY, times=1, after=1)]
    elif step == "re-warm: interrupted":
        return [Fault("DenoisingStage", CALL, times=1, action=_interrupt, after=1)]
    elif step == "rank late":  # this rank stalls past the others' timeout inside its request
        late = functools.partial(time.sleep, TIMEOUT_S * 1.5)
        return [Fault("DenoisingStage", CALL, times=1, action=late)]
    return []


def worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """The lifecycle once, the scenario's fault on its rank; writes what this rank ended on."""
    scenario = json.loads(Path(out_dir, "scenario.json").read_text())
    with gloo_rank(rank, world, port, 600):
        from calibration.lifecycle.run import run_lifecycle
        from calibration.lifecycle.steps import Settings
        from calibration.plan.apply import has_offload_hooks
        from runtime.measure.diffusers_hooks import pipeline_modules
        from runtime.measure.distributed import TorchDistributedAgreement
        from tests.calibration.lifecycle_setup import (
            STREAMING,
            calibration,
            points,
            session,
            take_over,
        )

        take_over(out_dir)
        cal = calibration()
        fresh, backend = session()
        step = scenario["step"] if scenario["rank"] == rank else ""
        backend.faults = tuple(_faults(step, fresh))
        settings = Settings(
            STREAMING,
            scenario["mode"],
            agreement=TorchDistributedAgreement(),
            rank_timeout_s=TIMEOUT_S,
        )
        try:
            report = run_lifecycle(fresh, points(), settings, calibration=cal).report
            result = {
                "status": report.status,
                "serving": report.serving,
                "placement": dict(report.placement),
                "steps": [s.name for s in report.steps],
            }
        except KeyboardInterrupt:
            result = {"interrupted": True}
        hooked = [n for n, m in pipeline_modules(fresh.pipe).items() if has_offload_hooks(m)]
        result["hooked"] = sorted(hooked)
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
