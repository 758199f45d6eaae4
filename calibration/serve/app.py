"""The HTTP worker (FastAPI): ``create_app(worker_factory, settings)``.

``POST /v1/images/generations`` (the route diffusers' example server uses) takes the pipeline's
params as a JSON object, ``GET /healthz`` says whether the worker is ready (503 until the lifecycle
validated), ``GET /metrics`` shows the Prometheus figures. The factory runs in a thread of its own
at start-up (the lifecycle takes minutes); requests run one at a time on the worker's thread
(``jobs.Jobs``), never on the event loop. docs/serving.md describes each answer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future

import attrs
from attrs import define, frozen
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from artifact.spelling import point_text
from calibration.errors import CalibrationError
from calibration.serve.admission import RequestRefused
from calibration.serve.answer import Answer, Worker
from calibration.serve.body import MAX_BODY_BYTES, Asked, BadBody, Format, parse
from calibration.serve.jobs import Closed, Jobs, QueueFull
from calibration.serve.metrics import Metrics
from calibration.serve.png import first_png, images_of, shape_of
from calibration.serve.worker import RequestFailed
from runtime import FormulaError

log = logging.getLogger(__name__)
ROUTE = "/v1/images/generations"


@frozen
class AppSettings:
    """``--queue``, ``--request-timeout``, and how long shutdown waits for the queue to drain."""

    queue: int = 8
    request_timeout_s: float = 600.0
    drain_timeout_s: float = 900.0


@define
class Holder:
    """The worker once its factory returned (or why it did not), and the app's parts."""

    settings: AppSettings
    metrics: Metrics
    jobs: Jobs[Done]
    worker: Worker | None = None
    failed: str = ""
    started: threading.Event = threading.Event()
    closing: bool = False


def create_app(worker_factory: Callable[[], Worker], settings: AppSettings) -> FastAPI:
    """The app; its lifespan starts the factory and, at shutdown, drains and closes the worker."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        holder = Holder(settings, Metrics(), Jobs(settings.queue), started=threading.Event())
        holder.jobs.on_idle = lambda: _idle(holder)
        app.state.holder = holder
        starter = threading.Thread(target=_start, args=(holder, worker_factory), daemon=True)
        starter.start()
        try:
            yield
        finally:
            await asyncio.to_thread(_stop, holder, starter)

    app = FastAPI(title="workload formulas worker", lifespan=lifespan)
    app.add_api_route(ROUTE, _generate, methods=["POST"])
    app.add_api_route("/healthz", _health, methods=["GET"])
    app.add_api_route("/metrics", _metrics, methods=["GET"])
    return app


def _start(holder: Holder, factory: Callable[[], Worker]) -> None:
    try:
        holder.worker = factory()
    except Exception as exc:  # noqa: BLE001 - told by /healthz, never a crash of the server
        log.error("the worker did not start: %s", exc)
        holder.failed = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
    finally:
        holder.started.set()


def _idle(holder: Holder) -> None:
    """The queue is empty: the worker may re-place (a re-plan after a drift), counted."""
    if holder.worker is not None and not holder.closing and holder.worker.idle():
        holder.metrics.replans.inc()


def _stop(holder: Holder, starter: threading.Thread) -> None:
    """Stop accepting, drain the queue, then undo every hook and flush the records."""
    holder.closing = True
    starter.join(holder.settings.drain_timeout_s)
    if not holder.jobs.drain(holder.settings.drain_timeout_s):
        log.error("the queue did not drain in %s s", holder.settings.drain_timeout_s)
    if holder.worker is not None:
        holder.worker.close()


def _holder(request: Request) -> Holder:
    holder: Holder = request.app.state.holder
    return holder


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"status": status, "message": message}}, status_code=status)


def _refusal(exc: RequestRefused) -> JSONResponse:
    """422 with admission's message and, per axis the request set, the largest admissible value
    and the largest that fits the device (null: none)."""
    error = {"status": 422, "message": str(exc), "reason": exc.reason.value}
    error |= {"largest_admissible": dict(exc.largest), "largest_fitting": dict(exc.fitting)}
    return JSONResponse({"error": error}, status_code=422)


async def _health(request: Request) -> JSONResponse:
    holder = _holder(request)
    if holder.closing:
        return _error(503, "shutting down")
    if holder.worker is None:
        return _error(503, holder.failed or "starting: the lifecycle has not validated yet")
    return JSONResponse({"status": "ready"})


async def _metrics(request: Request) -> Response:
    holder = _holder(request)
    holder.metrics.queue.set(holder.jobs.depth)
    return Response(holder.metrics.text(), media_type="text/plain; version=0.0.4")


async def _body(request: Request) -> bytes:
    """The body, refused (413) as soon as it passes ``MAX_BODY_BYTES``, declared or sent."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and len(declared) < 20 and int(declared) > MAX_BODY_BYTES:
        raise BadBody(413, f"the body is over {MAX_BODY_BYTES:,} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BadBody(413, f"the body is over {MAX_BODY_BYTES:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _generate(request: Request) -> JSONResponse:
    holder = _holder(request)
    worker = holder.worker
    if holder.closing or worker is None:
        return _error(503, "shutting down" if holder.closing else holder.failed or "starting")
    try:
        asked = parse(await _body(request), worker.pipeline, worker.defaults)
        future = holder.jobs.submit(lambda: _serve(worker, asked))
    except BadBody as exc:
        holder.metrics.refused("params" if exc.status == 422 else "body")
        return _error(exc.status, str(exc))
    except QueueFull as exc:
        holder.metrics.refused("queue-full")
        return _error(429, str(exc))
    except Closed as exc:
        return _error(503, str(exc))
    holder.metrics.queue.set(holder.jobs.depth)
    return await _answer(holder, asked, future)


@frozen
class Done:
    """A served request as the answer needs it: the output already rendered (its shape, the PNG
    when asked), so no tensor of it outlives the worker's turn (an idle re-plan measures next)."""

    answer: Answer
    shape: list[int]
    png: bytes | None


def _serve(worker: Worker, asked: Asked) -> Done:
    """On the worker's thread: say which request runs now (a log that shows what a signal cut),
    serve it, render its output."""
    log.info("request started: %s", point_text(asked.point))
    answer = worker.serve(asked.point)
    images = images_of(answer.output)
    png = first_png(images) if asked.format is Format.PNG else None
    return Done(attrs.evolve(answer, output=None), shape_of(images), png)


async def _answer(holder: Holder, asked: Asked, future: Future[Done]) -> JSONResponse:
    timeout = holder.settings.request_timeout_s
    try:
        done = await asyncio.wait_for(asyncio.wrap_future(future), timeout)
    except TimeoutError:
        holder.metrics.refused("timeout")
        return _error(504, f"the request did not finish in {timeout:g} s")
    except RequestRefused as exc:  # admission refused it before any work: the limits named
        holder.metrics.refused(exc.reason.value)
        return _refusal(exc)
    except RequestFailed as exc:  # it ran and failed: the placement is as before it
        log.warning("request %s failed: %s", point_text(asked.point), exc)
        holder.metrics.failures.inc()
        return _error(500, str(exc))
    except (FormulaError, CalibrationError) as exc:
        holder.metrics.refused(type(exc).__name__)
        return _error(422, str(exc))
    except Exception as exc:  # noqa: BLE001 - a failed request: the server's fault, said so
        log.warning("request %s failed: %s", asked.point, exc)
        holder.metrics.failures.inc()
        return _error(500, f"the request failed: {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        holder.metrics.queue.set(holder.jobs.depth)
    holder.metrics.served(done.answer)
    return JSONResponse(_document(done, asked))


def _document(done: Done, asked: Asked) -> dict[str, object]:
    answer = done.answer
    doc: dict[str, object] = {
        "params": dict(asked.point),
        "shape": done.shape,
        "decision": answer.decision,
        "seconds": answer.seconds,
        "phases": [
            {"phase": p.phase, "predicted_bytes": p.predicted, "measured_bytes": p.measured}
            for p in answer.phases
        ],
        "drift": answer.drift,
        "replanned": answer.replanned,
    }
    if done.png is not None:
        doc["image"] = {"format": "png", "b64": base64.b64encode(done.png).decode()}
    return doc
