"""`dslc serve` as a user runs it: a real uvicorn on 127.0.0.1 in a process of its own, health
503 -> 200, one generation, SIGTERM while a request runs (it finishes, the process exits 0, the
hooks come off and the state folder is written); and the message when the [serve] extra is absent.
Every wait is bounded (a hang guard, never a bound on speed)."""

from __future__ import annotations

import json
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from calibration.cli.serve import EXTRA
from calibration.serve.app import ROUTE

DSLC = Path(sys.executable).with_name("dslc")
HANG_S = 600  # the lifecycle on a loaded machine: a hang guard only
SHAPES = ["--target", "steps=2,height=64,width=64", "--probe", "steps=1,height=32,width=32"]
RUN = ["--device", "cpu", "--device-capacity", "64MiB", "--reserve", "1B", "--repeat", "1"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Lines:
    """A process's stderr, read on a thread of its own, waited on line by line."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        assert proc.stderr is not None
        stream = proc.stderr
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, text: str) -> str:
        """The first line (from here on) holding ``text``; fails at the end of the stream."""
        end = time.monotonic() + HANG_S
        while time.monotonic() < end:
            line = self._lines.get(timeout=HANG_S)
            if line is None:
                pytest.fail(f"the server ended before saying {text!r}: {''.join(self.seen)}")
            self.seen.append(line)
            if text in line:
                return line
        pytest.fail(f"no {text!r} in {HANG_S} s")

    def rest(self) -> str:
        """Every line until the stream ends (the process has exited)."""
        while (line := self._lines.get(timeout=HANG_S)) is not None:
            self.seen.append(line)
        return "".join(self.seen)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Lines, str, Path]]:
    port, state = _free_port(), tmp_path / "state"
    args = [str(DSLC), "serve", "--example", "flux", *SHAPES, *RUN]
    args += ["--state", str(state), "--port", str(port)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        yield proc, Lines(proc), f"http://127.0.0.1:{port}", state
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(HANG_S)


def _health(base: str) -> int | None:
    try:
        return httpx.get(f"{base}/healthz", timeout=HANG_S).status_code
    except httpx.TransportError:
        return None  # not listening yet


def test_a_real_server_starts_serves_and_drains_at_sigterm(server):
    proc, lines, base, state = server
    lines.wait_for("Uvicorn running")
    codes = [_health(base)]  # the lifecycle is still running: 503
    end = time.monotonic() + HANG_S
    while codes[-1] != 200 and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.2)
        codes.append(_health(base))
    assert codes[0] == 503 and codes[-1] == 200, codes
    small = httpx.post(
        f"{base}{ROUTE}", json={"steps": 1, "height": 32, "width": 32}, timeout=HANG_S
    )
    assert small.status_code == 200 and small.json()["shape"][-2:] == [32, 32], small.text

    answers: list[httpx.Response] = []
    body = {"steps": 12, "height": 64, "width": 64}
    long = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{base}{ROUTE}", json=body, timeout=HANG_S))
    )
    long.start()
    lines.wait_for("request started: steps=12")
    proc.send_signal(signal.SIGTERM)  # mid-request
    assert proc.wait(HANG_S) == 0
    long.join(HANG_S)
    log = lines.rest()

    assert [a.status_code for a in answers] == [200], log  # it finished, then the server stopped
    assert answers[0].json()["params"]["steps"] == 12
    assert "every hook removed" in log and "Traceback" not in log
    served = json.loads((state / "served.json").read_text())
    assert served and (state / "fingerprint.json").is_file()


def test_a_real_server_under_the_streaming_cap_becomes_ready_and_serves_the_target(tmp_path):
    # the cap the in-process worker validates at: the calibration must not run under it
    port = _free_port()
    capped = ["--device", "cpu", "--device-capacity", "1MiB", "--reserve", "1B", "--repeat", "1"]
    args = [str(DSLC), "serve", "--example", "flux", *SHAPES, *capped, "--port", str(port)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base, lines = f"http://127.0.0.1:{port}", Lines(proc)
    try:
        lines.wait_for("Uvicorn running")
        codes = [_health(base)]
        end = time.monotonic() + HANG_S
        while codes[-1] not in (200, None) and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.2)
            codes.append(_health(base))
        assert codes[-1] == 200, (codes[-3:], httpx.get(f"{base}/healthz").text)
        body = {"steps": 2, "height": 64, "width": 64}
        got = httpx.post(f"{base}{ROUTE}", json=body, timeout=HANG_S)
        assert got.status_code == 200, got.text
        assert got.json()["decision"] == "run" and not got.json()["drift"]
        assert max(p["measured_bytes"] for p in got.json()["phases"]) <= (1 << 20) - 1
    finally:
        proc.terminate()
        proc.wait(HANG_S)


BLOCKED = """
import sys
sys.modules["fastapi"] = None  # the [serve] extra absent: importing it fails
from dslc.cli import main
main(["serve", "--example", "flux", "--device", "cpu", "--device-capacity", "64MiB",
      "--reserve", "1MiB"])
"""


def test_without_the_serve_extra_the_command_says_how_to_install_it():
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED], check=False, capture_output=True, text=True, timeout=HANG_S
    )
    assert done.returncode == 1, done.stderr
    assert EXTRA in done.stderr and "Traceback" not in done.stderr
