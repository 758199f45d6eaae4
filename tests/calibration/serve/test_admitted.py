"""Admission in the HTTP worker on the tiny FLUX validated resident on a 1.3 MB device (no
reserve): the target RUNs under the placement in force, a wider request REPLACEs (its own plan
applied, then the resident placement back), a larger one is refused before any work; a phase
measured above its bound (a PEAK fault) is a drift event."""

from __future__ import annotations

import functools
import logging
import time
from types import MappingProxyType

import attrs
import pytest
from fastapi.testclient import TestClient

from calibration.cli.serve_boot import boot
from calibration.lifecycle.faults import PEAK, Fault, FaultyBackend
from calibration.placement.mechanisms import has_offload_hooks
from calibration.plan.model import Device, PlacementKind
from calibration.serve.admitted import AdmittedWorker, Drift
from calibration.serve.app import ROUTE, AppSettings, create_app
from calibration.serve.warm import Started
from runtime.measure.diffusers_hooks import pipeline_modules
from tests.calibration.lifecycle_setup import TARGET, lifecycle
from tests.calibration.serve.serving_setup import BOOT

WAIT_S = 600  # a hang guard for the lifecycle, never a bound on speed
RESIDENT = Device(1_300_000, reserve_bytes=0)
WIDER = {"steps": 2, "height": 64, "width": 80}
EXTRA = 200_000  # a PEAK fault's bytes: the decoder measured above its bound


@functools.cache
def resident() -> AdmittedWorker:
    return boot(attrs.evolve(BOOT, device=RESIDENT))


@pytest.fixture(scope="module")
def client():
    worker = resident().inner
    assert worker.plan is not None
    assert all(p.kind is PlacementKind.RESIDENT for p in worker.plan.placements)
    with TestClient(create_app(resident, AppSettings())) as c:
        assert c.app.state.holder.started.wait(WAIT_S)  # type: ignore[attr-defined]
        yield c


def _hooked() -> list[str]:
    return [n for n, m in pipeline_modules(resident().session.pipe).items() if has_offload_hooks(m)]


def test_the_target_runs_and_a_wider_request_replaces_then_the_placement_comes_back(client):
    worker = resident().inner
    assert worker.applied is not None
    hooked, streamed = _hooked(), dict(worker.applied.streamed)
    target = client.post(ROUTE, json={"steps": 2, "height": 64, "width": 64}).json()
    assert target["decision"] == "run" and not target["replanned"]
    wider = client.post(ROUTE, json=WIDER)
    assert wider.status_code == 200, wider.text
    doc = wider.json()
    assert doc["decision"] == "replace" and doc["replanned"] and doc["shape"][-2:] == [64, 80]
    assert worker.applied is not None and not worker.applied.undone  # the placement back
    assert _hooked() == hooked and worker.applied.streamed == streamed == {}
    again = client.post(ROUTE, json={"steps": 1, "height": 64, "width": 64}).json()
    assert again["decision"] == "run"
    text = client.get("/metrics").text
    assert 'wf_admissions_total{decision="replace"} 1.0' in text
    assert "wf_replans_total 1.0" in text


def test_a_larger_request_is_refused_with_the_limits(client):
    got = client.post(ROUTE, json={"steps": 2, "height": 96, "width": 96})
    assert got.status_code == 422, got.text
    error = got.json()["error"]
    assert error["reason"] == "too large"
    assert error["largest_admissible"] == {"steps": 2, "height": 96, "width": 96}
    assert error["largest_fitting"]["steps"] is None


def _idle_replan(client: TestClient) -> None:
    """Wait (bounded: a hang guard, no timing asserted) until the worker's idle moment has
    re-planned: a request posted before it would be admitted under the placement before."""
    deadline = time.monotonic() + WAIT_S
    while "wf_replans_total 1.0" not in client.get("/metrics").text:
        assert time.monotonic() < deadline, "no re-plan at the idle moment"
        time.sleep(0.05)


def test_a_drift_event_is_told_and_its_shape_and_larger_ones_are_served_conservatively(caplog):
    caplog.set_level(logging.INFO, logger="calibration.serve.admitted")
    caplog.set_level(logging.INFO, logger="calibration.serve.learn")
    outcome, session = lifecycle(device=RESIDENT)
    backend = session.recorder.backend
    assert isinstance(backend, FaultyBackend)
    target = dict(TARGET)  # the validated target: the values a request leaves out
    worker = AdmittedWorker(session, Started(outcome, False, ""), target, None, RESIDENT)
    backend.faults = (Fault("DecodingStage", PEAK, extra_bytes=EXTRA, times=1),)
    with TestClient(create_app(lambda: worker, AppSettings())) as c:
        assert c.app.state.holder.started.wait(WAIT_S)  # type: ignore[attr-defined]
        struck = c.post(ROUTE, json=target).json()
        smaller = c.post(ROUTE, json={"steps": 1, "height": 32, "width": 32}).json()
        _idle_replan(c)  # the re-plan runs when no request waits: before `again` is queued
        again = c.post(ROUTE, json=target)
        text = c.get("/metrics").text
        reserved = list(worker.drifts)
        # a drift whose point was not learned is served conservatively: its excess reserved
        worker.drifts.append(Drift(MappingProxyType(dict(target)), EXTRA))
        cautious = c.post(ROUTE, json=target)
    assert struck["decision"] == "run" and struck["drift"] is True
    over = [p for p in struck["phases"] if p["measured_bytes"] > p["predicted_bytes"]]
    assert over and all("DecodingStage" in p["phase"] for p in over)  # where the fault struck
    assert "wf_drift_events_total 1.0" in text
    assert "drift: steps=2,height=64,width=64" in caplog.text
    excess = max(p["measured_bytes"] - p["predicted_bytes"] for p in over)
    assert EXTRA - 64 * 1024 < excess <= EXTRA
    assert smaller["decision"] == "run" and smaller["drift"] is False  # not covered
    # the idle moment after the drift put the struck point into the fit: the re-fitted predictor
    # gives the same shape, under the placement it ran with, at least what each phase measured,
    # so its drift is no longer reserved; the target, planned again with it, validated
    assert worker.learner is not None and worker.learner.refits == 1 and not reserved
    refitted = worker.inner.predictor.predict(target, outcome.plan)
    for p in struck["phases"]:
        assert refitted.phase(p["phase"]).bound_bytes >= p["measured_bytes"], p
    assert "re-fitted with" in caplog.text, caplog.text
    assert "re-plan after drift: the target validated" in caplog.text, caplog.text
    assert worker.inner.plan is not None and worker.inner.plan != outcome.plan
    assert again.status_code == 200, again.text
    assert again.json()["decision"] == "run" and again.json()["drift"] is False, again.text
    assert "wf_replans_total 1.0" in text
    assert cautious.status_code in (200, 422), cautious.text
    assert "serving steps=2,height=64,width=64 conservatively" in caplog.text
