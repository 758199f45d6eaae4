"""bench/serve_load.py's SIGTERM: `dslc serve` (the tiny FLUX) in a process of its own on
127.0.0.1 gets a SIGTERM while a request runs and two more wait; each of them must get an answer
(the running one and the queued ones finish: the queue drains), the process exit 0, the hooks
come off and nothing print a traceback."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import httpx
from attrs import frozen

from bench.serve_load_core import HANG_S, free_port
from calibration.serve.app import ROUTE

DSLC = Path(sys.executable).with_name("dslc")
SHAPES = ["--target", "steps=2,height=64,width=64", "--probe", "steps=1,height=32,width=32"]
#: as tests/calibration/serve/test_real_server.py's SIGTERM test (the device given apart)
RUN = ["--device-capacity", "64MiB", "--reserve", "1B", "--repeat", "1"]
LONG = {"steps": 12, "height": 64, "width": 64}  # running when the signal comes
WAITING = ({"steps": 1, "height": 32, "width": 32}, {"steps": 2, "height": 48, "width": 48})


@frozen
class SigtermFigures:
    """What a SIGTERM mid-request left: answers, the exit status, the log."""

    answers: tuple[int | None, ...]  # each request's status (None: no answer)
    exit_status: int | None
    hooks_removed: bool
    traceback: bool

    def rows(self) -> list[tuple[str, str, str, bool]]:
        shown = ", ".join(str(a) for a in self.answers) or "none sent"
        answered = len(self.answers) == 1 + len(WAITING) and all(a == 200 for a in self.answers)
        return [
            ("SIGTERM: requests in flight answered", shown, "each 200", answered),
            ("SIGTERM: exit status", str(self.exit_status), "0", self.exit_status == 0),
            (
                "SIGTERM: hooks removed, no traceback",
                f"{self.hooks_removed}, {self.traceback}",
                "True, False",
                self.hooks_removed and not self.traceback,
            ),
        ]

    @property
    def hold(self) -> bool:
        return all(ok for *_, ok in self.rows())


def _lines(stream: IO[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


def _wait_for(lines: queue.Queue[str | None], seen: list[str], text: str) -> bool:
    end = time.monotonic() + HANG_S
    while time.monotonic() < end:
        line = lines.get(timeout=HANG_S)
        if line is None:
            return False
        seen.append(line)
        if text in line:
            return True
    return False


def _post(base: str, body: dict[str, int]) -> int | None:
    try:
        return httpx.post(f"{base}{ROUTE}", json=body, timeout=HANG_S).status_code
    except httpx.TransportError:
        return None


def _ready(base: str, proc: subprocess.Popen[str]) -> bool:
    end = time.monotonic() + HANG_S
    while time.monotonic() < end and proc.poll() is None:
        try:
            got = httpx.get(f"{base}/healthz", timeout=HANG_S)
        except httpx.TransportError:
            time.sleep(0.2)  # not listening yet
            continue
        if got.status_code == 200:
            return True
        if not got.json()["error"]["message"].startswith("starting"):
            return False  # the worker did not start: said why, never ready
        time.sleep(0.2)
    return False


def _queued(base: str, count: int) -> None:
    """Wait (bounded) until the worker's queue holds ``count`` requests (its /metrics gauge): a
    request still connecting when the signal comes is refused, not drained."""
    end = time.monotonic() + HANG_S
    while time.monotonic() < end:
        text = httpx.get(f"{base}/metrics", timeout=HANG_S).text
        depth = [
            line.split()[-1] for line in text.splitlines() if line.startswith("wf_queue_depth")
        ]
        if depth and float(depth[0]) >= count:
            return
        time.sleep(0.05)


def sigterm_figures(device: str = "cpu") -> SigtermFigures:
    """Start `dslc serve` on ``device`` (bench/gpu.sh: a CUDA one), send the long request and the
    waiting ones, SIGTERM mid-request."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    run = ["--device", device, *RUN, "--port", str(port)]
    args = [str(DSLC), "serve", "--example", "flux", *SHAPES, *run]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []
    assert proc.stderr is not None
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    try:
        if not _ready(base, proc):
            return SigtermFigures((), proc.poll(), False, True)
        with ThreadPoolExecutor(1 + len(WAITING)) as pool:
            running = pool.submit(_post, base, LONG)
            _wait_for(lines, seen, "request started: steps=12")
            waiting = [pool.submit(_post, base, body) for body in WAITING]
            _queued(base, len(WAITING))  # in the queue before the signal (then they must finish)
            proc.send_signal(signal.SIGTERM)
            answers = (running.result(HANG_S), *(w.result(HANG_S) for w in waiting))
        status = proc.wait(HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(HANG_S)
    while (line := lines.get(timeout=HANG_S)) is not None:
        seen.append(line)
    log = "".join(seen)
    return SigtermFigures(answers, status, "every hook removed" in log, "Traceback" in log)
