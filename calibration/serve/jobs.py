"""The worker's one thread and its bounded queue: requests run one at a time, off the event loop.

A full queue refuses at once (``QueueFull``, a 429); a request whose client stopped waiting (the
per-request timeout, a disconnect) is cancelled and skipped if it has not started; ``drain`` lets
every queued request finish, then stops the thread (graceful shutdown). ``on_idle`` runs on the
thread whenever a request ends with none waiting (the worker's re-plan after a drift).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


class QueueFull(Exception):
    """Every place in the queue is taken."""


class Closed(Exception):
    """The worker is shutting down and takes no new request."""


class Jobs(Generic[T]):
    """``submit`` a call; the one thread runs them in order and fills each future."""

    def __init__(self, size: int, on_idle: Callable[[], object] = lambda: None) -> None:
        self.on_idle = on_idle  # on the thread, whenever a request ends with none waiting
        self._queue: queue.Queue[tuple[Callable[[], T], Future[T]] | None] = queue.Queue(size)
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="wf-worker", daemon=True)
        self._thread.start()

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    def submit(self, call: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise Closed("the worker is shutting down")
            try:
                self._queue.put_nowait((call, future))
            except queue.Full:
                raise QueueFull(f"the queue is full ({self._queue.maxsize} waiting)") from None
        return future

    def drain(self, timeout_s: float | None = None) -> bool:
        """Take nothing new, let the queued requests run, stop the thread; whether it stopped."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(None)  # after the last request: the end
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            call, future = job
            if not future.set_running_or_notify_cancel():
                continue  # its client stopped waiting before it started
            try:
                future.set_result(call())
            except BaseException as exc:  # noqa: BLE001 - the request's failure, told its client
                future.set_exception(exc)
            if self._queue.empty():
                self._idle()

    def _idle(self) -> None:
        try:
            self.on_idle()
        except Exception:
            log.exception("the idle task failed")
