"""`dslc infer --timeout`: every request bounded in wall-clock time, interrupted only inside the
pipeline's own code.

In the main thread a ``SIGALRM`` timer raises ``RequestTimeout`` inside the call, which the
session records as that size's failure, and the ladder goes on. The signal can arrive anywhere,
though: in the recorder opening the request, in a stage hook, in the dispatch mode counting an
op, in the code that appends the record. An exception raised there would leave the recorder half
updated (a request with no record). So the handler looks at the frames it interrupted: it raises
only when the code running is not the measuring code (``BOOKKEEPING``, and ``contextlib``, whose
``__exit__`` runs our clean-ups) and the pipeline's call is under way
(``runtime.measure.diffusers_hooks.run_pipeline`` on the stack, inside the request's record);
anywhere else it tries again ``RETRY_SECONDS`` later. Nor does it raise where Python would print
the exception and drop it: in a garbage collector's callback, a ``__del__`` or a weakref callback
that runs inside the call (a timeout raised there was lost, and the request ran on unbounded); and
should one be dropped anyway, the timer fires again at a random moment up to ``RESEND_SECONDS``
later (random: a fixed delay could fall into the same dropping callback of a loop every time).
torch runs its ops in native code: a call is interrupted when the op running returns to Python (a
Python loop, a ``time.sleep``, the next op), never in the middle of one.
"""

from __future__ import annotations

import contextlib
import gc
import random
import signal
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from types import FrameType

#: Wall-clock seconds one request may take by default (`dslc infer --timeout`; at most
#: ``artifact.limits.MAX_REQUEST_SECONDS``).
REQUEST_SECONDS = 600.0
#: How soon a timer that fired inside the measuring code tries again.
RETRY_SECONDS = 0.001
#: How soon, at most, a timeout raised is raised again if the request still runs (it was dropped).
RESEND_SECONDS = 0.05
#: Modules whose code runs as callbacks whose exceptions Python prints and drops (weakrefs').
SWALLOWING = ("weakref", "_weakrefset")
#: Modules of the measuring code (prefixes): a timeout is never raised inside them. ``contextlib``
#: too: a timeout in its ``__exit__`` would skip the clean-up of our context managers.
BOOKKEEPING = (
    "runtime.",
    "calibration.core.session",
    "calibration.infer.measure",
    "calibration.infer.deadline",
    "calibration.core.offload",
    "calibration.plan.apply",  # a saved plan's hooks (--calibrate-offload plan:FILE)
    "calibration.core.calls",
    "calibration.core.wiring",
    "calibration.core.host",
    "contextlib",
)

_SECONDS: ContextVar[float] = ContextVar("request_seconds", default=REQUEST_SECONDS)
_JITTER = random.Random()  # when a timeout is sent again (no other code's random state moves)


class RequestTimeout(Exception):
    """A request ran past its wall-clock bound: that size failed (its record keeps this)."""


@contextlib.contextmanager
def request_seconds(seconds: float) -> Iterator[None]:
    """Every request run inside takes at most ``seconds`` of wall-clock time."""
    token = _SECONDS.set(seconds)
    try:
        yield
    finally:
        _SECONDS.reset(token)


def _measuring(frame: FrameType) -> bool:
    return str(frame.f_globals.get("__name__", "")).startswith(BOOKKEEPING)


def _dropping(frame: FrameType, callbacks: frozenset[object]) -> bool:
    """Whether an exception raised in ``frame`` would be printed and dropped, not raised: a
    garbage collector's callback, a ``__del__``, a weakref callback."""
    return (
        frame.f_code in callbacks
        or frame.f_code.co_name == "__del__"
        or str(frame.f_globals.get("__name__", "")) in SWALLOWING
    )


def in_the_call(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs code of the pipeline's call: not the measuring code, with the
    frame that called the pipeline around it (user code a hook calls, such as a chained step
    callback, counts: an exception there is the pipeline's, raised where our hook calls it),
    and no callback between them that would drop the exception (``_dropping``)."""
    from runtime.measure.diffusers_hooks import run_pipeline

    if frame is None or _measuring(frame):
        return False
    callbacks = frozenset(getattr(c, "__code__", None) for c in gc.callbacks)
    outer: FrameType | None = frame
    while outer is not None and outer.f_code is not run_pipeline.__code__:
        if _dropping(outer, callbacks):
            return False
        outer = outer.f_back
    return outer is not None


@contextlib.contextmanager
def deadline() -> Iterator[None]:
    """``RequestTimeout`` raised in the pipeline's code once ``request_seconds`` have passed (in
    the main thread; elsewhere unbounded: a signal reaches the main thread only)."""
    seconds = _SECONDS.get()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    armed = [True]

    def expire(signum: int, frame: FrameType | None) -> None:
        if not armed[0]:
            return
        if not in_the_call(frame):
            signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS)  # not here: a little later
            return
        again = _JITTER.uniform(RETRY_SECONDS, RESEND_SECONDS)  # if this one is dropped
        signal.setitimer(signal.ITIMER_REAL, again)
        raise RequestTimeout(f"the request ran past {seconds:g} s (--timeout)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
