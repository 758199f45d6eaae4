"""Any body a client can send to the in-process app: never a 500. JSON of every kind (nested, huge
ints, floats, strings, unknown keys, wrong types), raw text (NaN, Infinity, broken or deep JSON),
big bodies: a 4xx with a message, or a 200 for an admissible point."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from calibration.serve.app import ROUTE, AppSettings, create_app
from calibration.serve.body import MAX_BODY_BYTES
from tests.calibration.serve.serving_setup import Gated, worker

WAIT_S = 600  # a hang guard for the worker's start, never a bound on speed
PARAMS = ("steps", "height", "width", "cfg", "response_format")
RAW = (
    b"NaN",
    b'{"steps": NaN}',
    b'{"steps": Infinity}',
    b'{"steps": 1e999}',
    b'{"steps": 1, "steps": 2}',
    b"[" * 5000,
    b'{"a":' * 3000,
    b" " * (MAX_BODY_BYTES + 1),
    b'{"steps": "' + b"9" * MAX_BODY_BYTES + b'"}',
    b'{"steps": ' + b"9" * 5000 + b"}",
    b"\xff\xfe{}",
    b"",
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-4, 80),  # near the params' ranges: some admissible
    st.integers(),  # huge ones
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["png", "json", "PNG"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
objects = st.dictionaries(
    st.one_of(st.sampled_from(PARAMS), st.text(max_size=12)), values, max_size=6
)
bodies = st.one_of(
    objects.map(lambda d: json.dumps(d).encode()),
    st.lists(values, max_size=3).map(lambda d: json.dumps(d).encode()),
    values.map(lambda d: json.dumps(d).encode()),
    st.sampled_from(RAW),
    st.binary(max_size=64),
    st.integers(1, 3000).map(lambda n: json.dumps({f"k{i}": i for i in range(n)}).encode()),
)


@pytest.fixture(scope="module")
def client():
    worker()  # booted before the app starts
    app = create_app(lambda: Gated(), AppSettings())  # type: ignore[arg-type,return-value]
    with TestClient(app) as c:
        assert c.app.state.holder.started.wait(WAIT_S)  # type: ignore[attr-defined]
        yield c


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies)
def test_no_body_gets_a_500(client, body):
    got = client.post(ROUTE, content=body, headers={"content-type": "application/json"})
    event(f"status {got.status_code}")
    if got.status_code == 200:
        point = got.json()["params"]
        assert worker().pipeline.is_admissible(**point), point
        return
    assert 400 <= got.status_code < 500, (body[:200], got.status_code, got.text[:300])
    message = got.json()["error"]["message"]
    assert isinstance(message, str) and message.strip()
