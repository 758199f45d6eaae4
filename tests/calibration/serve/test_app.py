"""The HTTP app in-process (fastapi's TestClient, httpx underneath) on the tiny FLUX: answers,
refusals with the runtime's own messages, the bounded queue, the timeout, health and metrics."""

from __future__ import annotations

import base64
import json
import threading

import pytest
from fastapi.testclient import TestClient

from calibration.serve.app import ROUTE, AppSettings, create_app
from calibration.serve.body import MAX_BODY_BYTES
from tests.calibration.serve.serving_setup import Gated, worker

WAIT_S = 600  # a hang guard for the worker's start (the lifecycle), never a bound on speed


def _client(gated: Gated, **settings: float) -> TestClient:
    return TestClient(create_app(lambda: gated, AppSettings(**settings)))  # type: ignore[arg-type]


def _ready(client: TestClient) -> None:
    assert client.app.state.holder.started.wait(WAIT_S)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def client():
    worker()  # booted before the app starts: the tests below never race the lifecycle
    with _client(Gated()) as c:
        _ready(c)
        yield c


def test_healthz_is_503_until_the_worker_is_ready_then_200():
    gate = threading.Event()
    late = Gated()

    def factory() -> Gated:
        gate.wait(WAIT_S)
        return late

    with TestClient(create_app(factory, AppSettings())) as c:  # type: ignore[arg-type]
        assert c.get("/healthz").status_code == 503
        assert c.post(ROUTE, json={}).status_code == 503
        gate.set()
        _ready(c)
        assert c.get("/healthz").json() == {"status": "ready"}
    assert late.closed  # the lifespan's end closed it


def test_a_generation_answers_its_metadata(client):
    got = client.post(ROUTE, json={"steps": 1, "height": 32, "width": 32})
    assert got.status_code == 200, got.text
    doc = got.json()
    assert doc["params"] == {"steps": 1, "height": 32, "width": 32, "cfg": False}
    assert doc["shape"][-2:] == [32, 32] and doc["decision"] == "run"
    assert doc["phases"][0]["measured_bytes"] > 0 and "image" not in doc


def test_png_is_sent_when_asked(client):
    doc = client.post(ROUTE, json={"steps": 1, "response_format": "png"}).json()
    data = base64.b64decode(doc["image"]["b64"])
    assert data.startswith(b"\x89PNG\r\n\x1a\n")


def test_inadmissible_params_are_422_with_the_runtimes_message(client):
    pipeline = worker().pipeline
    with pytest.raises(Exception) as raised:
        pipeline.evaluate(**{**worker().defaults, "height": 65})
    got = client.post(ROUTE, json={"height": 65})
    assert got.status_code == 422 and got.json()["error"]["message"] == str(raised.value)
    assert "nearest admissible: height = 64 or 80" in got.text
    unknown = client.post(ROUTE, json={"heigth": 64}).json()["error"]["message"]
    assert "has no param 'heigth'" in unknown


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"{", 400),
        (b'{"steps": NaN}', 400),
        (b'{"steps": 1, "steps": 2}', 400),
        (b"[1, 2]", 400),
        (b'{"steps": 1e400}', 422),
        (b'{"steps": ' + b"9" * 5000 + b"}", 400),
        (b'{"steps": {"a": [[[]]]}}', 422),
        (b'{"steps": "2"}', 422),
        (b'{"steps": true}', 422),
        (b'{"response_format": ["png"]}', 400),
        (b"[" * 100_000, 413),
        (b" " * (MAX_BODY_BYTES + 1), 413),
    ],
)
def test_bad_bodies_are_4xx(client, body, status):
    got = client.post(ROUTE, content=body, headers={"content-type": "application/json"})
    assert got.status_code == status, got.text


def test_a_full_queue_is_429_and_a_slow_request_504():
    gate = threading.Event()
    gated = Gated(gate)
    with _client(gated, queue=1, request_timeout_s=0.5) as c:
        _ready(c)
        answers: list[int] = []
        first = threading.Thread(
            target=lambda: answers.append(c.post(ROUTE, json={"steps": 1}).status_code)
        )
        first.start()
        assert gated.started.wait(WAIT_S)  # the worker is busy with the first
        second = threading.Thread(
            target=lambda: answers.append(c.post(ROUTE, json={"steps": 1}).status_code)
        )
        second.start()
        for _ in range(1000):  # until the second waits in the queue (a bounded count of polls)
            if c.app.state.holder.jobs.depth == 1:  # type: ignore[attr-defined]
                break
            threading.Event().wait(0.01)
        assert c.post(ROUTE, json={"steps": 1}).status_code == 429
        first.join(WAIT_S)
        second.join(WAIT_S)
        gate.set()
        assert sorted(answers) == [504, 504]
        metrics = c.get("/metrics").text
    assert 'wf_refusals_total{reason="queue-full"} 1.0' in metrics
    assert 'wf_refusals_total{reason="timeout"} 2.0' in metrics


def test_metrics_count_what_was_served_and_refused(client):
    client.post(ROUTE, json={"steps": 1})
    client.post(ROUTE, json={"width": 17})
    text = client.get("/metrics").text
    assert 'wf_admissions_total{decision="run"}' in text
    assert 'wf_refusals_total{reason="params"}' in text
    assert 'wf_phase_peak_bytes{kind="measured",phase="component:vae@DecodingStage"}' in text
    assert 'wf_phase_peak_bytes{kind="predicted",phase="component:vae@DecodingStage"}' in text
    assert "wf_request_seconds_count" in text and "wf_queue_depth 0.0" in text
    assert json.loads(client.get("/healthz").text) == {"status": "ready"}


def test_a_request_no_placement_fits_is_refused_before_any_work_naming_the_limits(client):
    served = worker().session.recorder.served
    before = served[-1] if served else None
    got = client.post(ROUTE, json={"steps": 2, "height": 128, "width": 128})
    assert got.status_code == 422, got.text
    error = got.json()["error"]
    assert error["reason"] == "too large" and "fits no placement" in error["message"]
    assert error["largest_fitting"]["height"] == 32 and error["largest_admissible"]["width"] == 128
    served = worker().session.recorder.served
    assert (served[-1] if served else None) is before  # nothing ran
    assert 'wf_refusals_total{reason="too large"} 1.0' in client.get("/metrics").text


def test_a_served_answer_sets_each_phase_bound_beside_the_measured_peak(client):
    doc = client.post(ROUTE, json={"steps": 1, "height": 32, "width": 32}).json()
    phases = doc["phases"]
    predicted = worker().inner.predictor.predict(doc["params"]).phases
    assert [p["phase"] for p in phases] == [p.label for p in predicted]
    assert all(0 < p["measured_bytes"] <= p["predicted_bytes"] for p in phases)
    assert doc["drift"] is False


def test_serve_json_logs_one_object_a_line(capsys):
    import json as json_module
    import logging

    from calibration.cli.serve import _log_to_stderr

    _log_to_stderr(as_json=True)
    logger = logging.getLogger("calibration.serve")
    try:
        logger.info("drift: %s", "steps=2")
        line = capsys.readouterr().err.strip().splitlines()[-1]
    finally:
        for name in ("calibration.serve", "calibration.cli.serve"):
            for handler in logging.getLogger(name).handlers[:]:
                logging.getLogger(name).removeHandler(handler)
    record = json_module.loads(line)
    assert record["message"] == "drift: steps=2" and record["level"] == "INFO"
    assert record["logger"] == "calibration.serve"
