"""The worker on the real tiny FLUX (CPU, exact backend, the Steady clock) after the lifecycle
validated on a 1.3 MB device without reserve (every component resident): requests RUN,
REPLACE, are refused before any work, or fail mid-denoise / out of memory, and after each the
pipeline's hooks and devices are as before."""

from __future__ import annotations

import pytest

from calibration.lifecycle.faults import ERROR, OUT_OF_MEMORY, Fault, FaultyBackend
from calibration.lifecycle.model import OK
from calibration.placement.mechanisms import has_offload_hooks
from calibration.plan.model import Device
from calibration.serve.admission import DecisionKind, RefusalReason, RequestRefused
from calibration.serve.worker import NotServing, RequestFailed, Worker
from runtime.measure.diffusers_hooks import pipeline_modules
from tests.calibration.lifecycle_setup import lifecycle

pytest.importorskip("accelerate")

DEVICE = Device(1_300_000, reserve_bytes=0)
WIDER = {"steps": 2, "height": 64, "width": 80}


def _state(worker: Worker) -> dict[str, object]:
    """Each component's hooks and each tensor's device: what must be as before every request."""
    modules = pipeline_modules(worker.session.pipe)
    return {
        name: (
            has_offload_hooks(m),
            tuple(str(t.device) for t in (*m.parameters(), *m.buffers())),
        )
        for name, m in modules.items()
    }


@pytest.fixture(scope="module")
def worker() -> Worker:
    outcome, session = lifecycle(device=DEVICE)
    assert outcome.report.status == OK and outcome.report.serving
    return Worker.after(outcome, session, DEVICE)


def test_a_small_request_runs_under_the_placement_in_force(worker: Worker) -> None:
    before = _state(worker)
    served = worker.serve({"steps": 1, "height": 32, "width": 32})
    assert served.decision.kind is DecisionKind.RUN and served.placing_s == 0
    assert served.record.ok and served.record is worker.session.recorder.served[-1]
    assert [p.label for p in served.phases] == [p.label for p in served.prediction.phases]
    assert all(p.measured_bytes is not None and p.within for p in served.phases)
    assert _state(worker) == before


def test_a_request_larger_than_the_validated_shape_replaces_and_fits(worker: Worker) -> None:
    before = _state(worker)
    served = worker.serve(WIDER)
    assert served.decision.kind is DecisionKind.REPLACE and served.record.ok
    assert served.transfer_s == served.decision.transfer_s > 0
    assert served.placing_s > 0  # measured on the session's clock around the re-placing
    assert 0 < served.peak_bytes <= DEVICE.usable_bytes
    assert all(p.within for p in served.phases)
    assert _state(worker) == before


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"steps": 2, "height": 128, "width": 128}, RefusalReason.TOO_LARGE),
        ({"height": 70}, RefusalReason.INADMISSIBLE),
    ],
)
def test_refused_before_any_work(worker: Worker, params: dict, reason: RefusalReason) -> None:
    before, served = _state(worker), len(worker.session.recorder.served)
    with pytest.raises(RequestRefused) as refused:
        worker.serve(params)
    assert refused.value.reason is reason
    assert "largest" in str(refused.value)
    assert len(worker.session.recorder.served) == served  # nothing ran
    assert _state(worker) == before


@pytest.mark.parametrize("kind", [ERROR, OUT_OF_MEMORY])
@pytest.mark.parametrize("params", [{"steps": 2, "height": 64, "width": 64}, WIDER])
def test_a_request_failing_mid_denoise_leaves_the_pipeline_as_before(
    worker: Worker, kind: str, params: dict
) -> None:
    backend = worker.session.recorder.backend
    assert isinstance(backend, FaultyBackend)
    before = _state(worker)
    backend.faults = (Fault("DenoisingStage", kind),)  # every request until removed
    try:
        with pytest.raises(RequestFailed) as failed:
            worker.serve(params)
    finally:
        backend.faults = ()
    assert failed.value.out_of_memory is (kind == OUT_OF_MEMORY)
    assert _state(worker) == before
    assert worker.serve(params).record.ok  # and it serves on


@pytest.mark.parametrize("kind", [ERROR, OUT_OF_MEMORY])
def test_a_request_failing_mid_denoise_leaves_no_tensor_alive(worker: Worker, kind: str) -> None:
    """Found by bench/serve_load.py: diffusers clears ``pipe._current_timestep`` only when its
    loop ends, so a failed request's timestep (a view of its timesteps) outlived it."""
    backend = worker.session.recorder.backend
    assert isinstance(backend, FaultyBackend)
    assert worker.serve({"steps": 1, "height": 32, "width": 32}).record.ok
    before = backend.inner.current_allocated()
    backend.faults = (Fault("DenoisingStage", kind),)
    try:
        with pytest.raises(RequestFailed):
            worker.serve({"steps": 3, "height": 32, "width": 32})
    finally:
        backend.faults = ()
    assert backend.inner.current_allocated() == before


def test_a_lifecycle_that_did_not_enter_serving_gives_no_worker() -> None:
    outcome, session = lifecycle(mode="off")
    with pytest.raises(NotServing, match="mode off"):
        Worker.after(outcome, session, DEVICE)
