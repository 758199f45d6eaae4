"""bench/serve_load.py's core: the trace, the faulting worker, the loopback HTTP run, the figures.

Importable alone (tests/calibration/serve/test_serve_load.py runs it on a dozen requests)."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from pathlib import Path
from types import MappingProxyType

import httpx
from attrs import define, field, frozen

from artifact.point import Point
from calibration.calibrate.run import load_pipeline, shapes
from calibration.core.session import Session
from calibration.examples import EXAMPLES
from calibration.lifecycle.faults import ERROR, OUT_OF_MEMORY, Fault, FaultyBackend
from calibration.lifecycle.run import run_lifecycle
from calibration.lifecycle.steps import Settings
from calibration.plan.model import Device
from calibration.serve.admitted import AdmittedWorker
from calibration.serve.answer import Answer
from calibration.serve.app import ROUTE, AppSettings, create_app
from calibration.serve.warm import Started
from calibration.serve.worker import RequestFailed
from runtime import Pipeline
from runtime.measure.backends import LiveTensorBackend

FORMULAS = Path(__file__).resolve().parent.parent / "formulas"
HANG_S = 600.0  # a hang guard: a request not answered in this time is hung (never a speed bound)
GONE_S = 0.05  # a disconnecting client waits this long for its answer, then hangs up
STAGE = "DenoisingStage"  # where the injected faults strike: mid-denoise


@frozen
class Setup:
    """One example's probe, validated target, and capacity cap."""

    probe: Mapping[str, int]
    target: Mapping[str, int]
    device: Device


#: The tiny examples under a cap at which the target is validated streaming (the docs' FLUX run).
EXAMPLE_SETUPS = {
    "flux": Setup(
        {"steps": 1, "height": 32, "width": 32},
        {"steps": 2, "height": 64, "width": 64},
        Device(1 << 20, reserve_bytes=0),
    ),
    "sdxl": Setup(
        {"steps": 1, "height": 64, "width": 64},
        {"steps": 2, "height": 128, "width": 128},
        Device(6 << 20, reserve_bytes=0),
    ),
}


class Kind(Enum):
    """What a trace request is, and so what its answer should be."""

    SMALL = "small"
    MEDIUM = "medium"  # the validated target's size
    LARGE = "large"  # larger than the validated target: re-placed, or refused too large
    HUGE = "huge"  # twice the target's side: refused too large
    BAD = "bad"  # inadmissible: a 422 before any work
    RAISE = "raise"  # admitted, raises mid-denoise: a 500
    OOM = "oom"  # admitted, an injected out-of-memory error mid-denoise: a 500
    GONE = "gone"  # its client hangs up before the answer


WEIGHTS = {
    Kind.SMALL: 40,
    Kind.MEDIUM: 15,
    Kind.LARGE: 10,
    Kind.HUGE: 5,
    Kind.BAD: 12,
    Kind.RAISE: 6,
    Kind.OOM: 6,
    Kind.GONE: 6,
}
FAULTS = {Kind.RAISE: ERROR, Kind.OOM: OUT_OF_MEMORY}


@frozen
class Item:
    """One request of the trace."""

    index: int
    kind: Kind
    body: Mapping[str, object] = field(converter=lambda b: MappingProxyType(dict(b)))


def _side(target: Mapping[str, int], scale: float) -> int:
    return max(16, round(target["height"] * scale / 16) * 16)


def body_of(kind: Kind, target: Mapping[str, int], rng: random.Random) -> dict[str, object]:
    """A request of ``kind`` around ``target`` (a fault's shape is marked by its steps, which no
    other kind uses: the target's steps + 1 raises, + 2 runs out of memory)."""
    steps = target["steps"]
    if kind is Kind.SMALL:
        side = _side(target, rng.choice((0.5, 0.75)))
        return {"steps": rng.randint(1, steps), "height": side, "width": side}
    if kind in (Kind.MEDIUM, Kind.GONE):
        return {"steps": steps, "height": target["height"], "width": target["width"]}
    if kind is Kind.LARGE:
        return {"steps": steps, "height": _side(target, 1.25), "width": _side(target, 1.5)}
    if kind is Kind.HUGE:
        return {"steps": steps, "height": _side(target, 2), "width": _side(target, 2)}
    if kind is Kind.BAD:
        bad: tuple[dict[str, object], ...] = (
            {"height": target["height"] + 6},  # breaks the contract height % 16 == 0
            {"steps": 0},  # out of range
            {"stepz": 2},  # an unknown param
            {"steps": "two"},  # a wrong type
        )
        return dict(rng.choice(bad))
    extra = 1 if kind is Kind.RAISE else 2
    return {"steps": steps + extra, "height": _side(target, 0.5), "width": _side(target, 0.5)}


def make_trace(seed: int, count: int, target: Mapping[str, int]) -> tuple[Item, ...]:
    """``count`` requests (each kind at least once when ``count`` allows), seeded, shuffled."""
    rng = random.Random(seed)
    kinds = list(Kind)[:count]
    kinds += rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=count - len(kinds))
    rng.shuffle(kinds)
    return tuple(Item(i, k, body_of(k, target, rng)) for i, k in enumerate(kinds))


@frozen
class Seen:
    """One request as the worker ran it: its fault, measured peak, and the tracked memory."""

    params: Point
    fault: str | None
    peak: int | None  # the largest measured phase (None: it failed)
    out_of_memory: bool
    before: int  # tracked bytes as it started
    after_failure: int | None  # tracked bytes once it failed (None: it did not)


class Faulting:
    """The admitted worker with a fault injected by shape (from Python only) and the tracked
    memory read around each request; ``close`` leaves the worker serving (the bench closes it)."""

    def __init__(self, inner: AdmittedWorker, backend: FaultyBackend, steps: int) -> None:
        self.inner, self.backend = inner, backend
        self.faults = {steps + 1: ERROR, steps + 2: OUT_OF_MEMORY}
        self.baseline = self.tracked()
        self.seen: list[Seen] = []
        self.closed = False

    @property
    def pipeline(self) -> Pipeline:
        return self.inner.pipeline

    @property
    def defaults(self) -> Point:
        return self.inner.defaults

    def tracked(self) -> int:
        return self.backend.inner.current_allocated()

    def serve(self, params: Point) -> Answer:
        fault = self.faults.get(params.get("steps"))  # type: ignore[arg-type]
        before = self.tracked()
        self.backend.faults = (Fault(STAGE, fault),) if fault else ()
        try:
            answer = self.inner.serve(params)
        except RequestFailed as exc:
            self.backend.faults = ()
            self.seen.append(Seen(params, fault, None, exc.out_of_memory, before, self.tracked()))
            raise
        finally:
            self.backend.faults = ()
        peak = max((p.measured or 0 for p in answer.phases), default=0)
        self.seen.append(Seen(params, fault, peak, False, before, None))
        return answer

    def idle(self) -> bool:
        return self.inner.idle()

    def close(self) -> None:
        self.closed = True


def booted(example: str, setup: Setup) -> Faulting:
    """The tiny ``example`` on the CPU through the lifecycle (calibrate, plan, apply, validate the
    target under the cap), then serving, its memory backend able to fail on cue."""
    ex = EXAMPLES[example]
    formulas = load_pipeline(FORMULAS / ex.formula_file, ex.pipeline)
    backend = FaultyBackend(LiveTensorBackend())
    session = Session(
        ex.build(0),  # type: ignore[arg-type]
        formulas,
        "cpu",
        call_kwargs=ex.call_kwargs,
        backend=backend,
    )
    backend.watch(session.recorder)
    points = shapes(formulas, ex.shapes, target=setup.target, probe=setup.probe)
    outcome = run_lifecycle(session, points, Settings(setup.device, "apply", repeat=1))
    started = Started(outcome, False, "bench")
    worker = AdmittedWorker(session, started, points.target, None, setup.device)
    return Faulting(worker, backend, int(setup.target["steps"]))


@frozen
class Got:
    """One trace request's end at its client: an answer, or why none came."""

    item: Item
    status: int | None
    doc: Mapping[str, object] = field(converter=lambda d: MappingProxyType(dict(d)))
    gone: bool = False  # its client hung up as planned
    lost: str = ""  # no answer and not planned: why


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def send(base: str, item: Item) -> Got:
    """POST one request; a GONE one hangs up after ``GONE_S`` (a read timeout)."""
    timeout = httpx.Timeout(HANG_S, read=GONE_S) if item.kind is Kind.GONE else HANG_S
    try:
        got = httpx.post(f"{base}{ROUTE}", json=dict(item.body), timeout=timeout)
    except httpx.ReadTimeout as exc:
        if item.kind is Kind.GONE:
            return Got(item, None, {}, gone=True)
        return Got(item, None, {}, lost=f"hung: {exc}")
    except httpx.TransportError as exc:
        return Got(item, None, {}, lost=f"{type(exc).__name__}: {exc}")
    try:
        doc = got.json()
    except json.JSONDecodeError:
        return Got(item, got.status_code, {"raw": got.text[:300]})
    return Got(item, got.status_code, doc if isinstance(doc, dict) else {"raw": doc})


@define
class Served:
    """What the loopback run saw: each trace request's end, and the server after the trace."""

    got: list[Got]
    healthy_after: bool
    served_after: bool
    metrics: str


def _wait_ready(base: str) -> None:
    end = time.monotonic() + HANG_S
    while time.monotonic() < end:
        try:
            if httpx.get(f"{base}/healthz", timeout=HANG_S).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"the worker was not ready in {HANG_S:g} s")


def serve_over_http(worker: Faulting, trace: Sequence[Item], clients: int) -> Served:
    """The trace from ``clients`` concurrent clients against a real uvicorn on 127.0.0.1; then
    whether the server still says ready and serves, and its /metrics."""
    import uvicorn

    app = create_app(
        lambda: worker, AppSettings(queue=max(8, len(trace)), request_timeout_s=HANG_S)
    )
    base = f"http://127.0.0.1:{(port := free_port())}"
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)  # not the main thread: no signals
    thread.start()
    try:
        _wait_ready(base)
        with ThreadPoolExecutor(clients) as pool:
            got = list(pool.map(lambda item: send(base, item), trace))
        healthy = httpx.get(f"{base}/healthz", timeout=HANG_S).status_code == 200
        small = body_of(Kind.SMALL, dict(worker.defaults), random.Random(0))  # type: ignore[arg-type]
        again = httpx.post(f"{base}{ROUTE}", json=small, timeout=HANG_S).status_code == 200
        metrics = httpx.get(f"{base}/metrics", timeout=HANG_S).text
    finally:
        server.should_exit = True
        thread.join(HANG_S)
    return Served(got, healthy, again, metrics)


@frozen
class Figures:
    """The load test's figures (docs/serving.md, "Under load")."""

    oom_admitted: int  # admitted requests that ran out of memory (the injected ones aside)
    lost_or_hung: int  # requests with no answer whose client did not hang up as planned
    refusals: int  # answers that refused the request
    refusals_wrong: int  # of those: not a 4xx, or not naming the limit
    failures_wrong: int  # fault requests not answered 500 naming the failure, others answered 500
    peak_bytes: int  # the largest measured phase peak of an admitted request
    usable_bytes: int  # capacity - reserve
    not_back: int  # failures after which the tracked memory was not back to its baseline

    def rows(self) -> list[tuple[str, str, str, bool]]:
        return [
            ("OOM on admitted requests", str(self.oom_admitted), "0", self.oom_admitted == 0),
            ("requests lost or hung", str(self.lost_or_hung), "0", self.lost_or_hung == 0),
            (
                f"refusals not a 4xx naming the limit (of {self.refusals})",
                str(self.refusals_wrong),
                "0",
                self.refusals_wrong == 0,
            ),
            (
                "fault answers not a 500 naming it",
                str(self.failures_wrong),
                "0",
                not self.failures_wrong,
            ),
            (
                "largest measured peak, bytes",
                f"{self.peak_bytes:,}",
                f"<= {self.usable_bytes:,}",
                self.peak_bytes <= self.usable_bytes,
            ),
            ("failures with memory not back", str(self.not_back), "0", self.not_back == 0),
        ]

    @property
    def hold(self) -> bool:
        return all(ok for *_, ok in self.rows())
