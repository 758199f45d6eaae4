"""`dslc infer --timeout` interrupts only the pipeline's own code (calibration.infer.deadline): a
timer that fires while the recorder opens a request, counts an op or appends the record waits
until the pipeline runs again, so every request leaves its record. Before, a 1 ms timeout left
a request with no record in about one run of four (IndexError, exit 3: the fuzzer's case 36303).
"""

from __future__ import annotations

import sys
import time
from types import FrameType

import pytest
from click.testing import CliRunner

from calibration.core.session import Session
from calibration.infer.deadline import RequestTimeout, deadline, in_the_call, request_seconds
from dslc.build import load_text
from dslc.cli import cli

FORMULAS = """pipeline sleepy {
    param steps: int = 2 in [1, 8]
    call num_inference_steps = steps
    stage DenoisingStage uses unet per step {
        iterations = steps
        memory ~ steps
    }
}
"""


class Sleepy:
    """A pipeline that notes whether its own frame counts as inside the call, then sleeps."""

    def __init__(self, seconds: float) -> None:
        import torch

        self.components = {"unet": torch.nn.Linear(2, 2)}
        self.seconds = seconds
        self.inside: list[bool] = []

    def __call__(
        self, num_inference_steps: int = 1, callback_on_step_end: object = None, **kwargs: object
    ) -> None:
        import torch

        here: FrameType = sys._getframe()
        self.inside.append(in_the_call(here))
        for i in range(num_inference_steps):
            self.components["unet"](torch.ones(1, 2))
            if callable(callback_on_step_end):
                callback_on_step_end(self, i, i, {})
        time.sleep(self.seconds)


def _session(pipe: Sleepy) -> Session:
    return Session(pipe, load_text(FORMULAS, "sleepy.wf")["sleepy"], "cpu")  # type: ignore[arg-type]


def test_only_the_pipelines_own_frames_are_inside_the_call():
    assert not in_the_call(sys._getframe())  # a test's frame: no pipeline call around it
    assert not in_the_call(None)
    pipe = Sleepy(0.0)
    _session(pipe).run({"steps": 1})
    assert pipe.inside == [True]


def test_a_timeout_fails_the_request_and_keeps_its_record():
    pipe = Sleepy(5.0)
    session = _session(pipe)
    with request_seconds(0.05), deadline():
        record = session.run({"steps": 1})
    # interrupted in the 5 s sleep (a request that ended on its own has no error)
    assert record.error is not None and record.error.type.endswith(RequestTimeout.__name__)


def test_tiny_timeouts_never_leave_a_request_without_its_record():
    """The timer fires at every point of the request over the runs: exit 0, 1 or 5, never 3."""
    for timeout in ("0.0001", "0.0003", "0.001", "0.002", "0.004", "0.008"):
        result = CliRunner().invoke(
            cli,
            [
                "infer", "--pipeline", "calibration.fuzzing.infer:toy",
                "--axis", "frames=23 in [16, 23] -> num_frames", "--timeout", timeout,
            ],
        )  # fmt: skip
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        assert result.exit_code in (0, 1, 5), (timeout, result.output)


class Collecting(Sleepy):
    """A pipeline that collects garbage ``ROUNDS`` times: a collector callback (``slow_callback``)
    takes most of its time, so the timer mostly fires there, where Python drops exceptions."""

    ROUNDS = 200
    own = 0.001  # seconds of the pipeline's own code between two collections

    def __call__(
        self, num_inference_steps: int = 1, callback_on_step_end: object = None, **kwargs: object
    ) -> None:
        import gc

        self.rounds = 0
        for _ in range(self.ROUNDS):
            gc.collect()
            _busy(self.own)
            self.rounds += 1


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def slow_callback(phase: str, info: object) -> None:
    if phase == "start":
        _busy(0.02)


def _cut(pipe: Collecting) -> object:
    """One request of ``pipe`` with a 0.05 s timeout and ``slow_callback`` on; its record, after
    asserting the timeout cut it: it ended with ``RequestTimeout`` before its last round (all 200
    take seconds; a lost timeout let them all run)."""
    import gc

    session = _session(pipe)
    gc.callbacks.append(slow_callback)
    try:
        with request_seconds(0.05), deadline():
            record = session.run({"steps": 1})
    finally:
        gc.callbacks.remove(slow_callback)
    assert pipe.rounds < Collecting.ROUNDS, pipe.rounds
    assert record.error is not None and record.error.type.endswith(RequestTimeout.__name__)
    return record


def test_a_timeout_is_never_lost_in_a_garbage_collector_callback(capfd):
    _cut(Collecting(0.0))  # before: raised in the callback, dropped, the request ran every round
    assert "Exception ignored" not in capfd.readouterr().err


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped ones
def test_a_timeout_dropped_anyway_is_raised_again(monkeypatch):
    """Were a dropping callback not recognised, the timer fires again until one is raised."""
    import calibration.infer.deadline as module

    monkeypatch.setattr(module, "_dropping", lambda frame, callbacks: False)
    pipe = Collecting(0.0)
    pipe.own = 0.02  # half the time: a timer sent again lands there soon
    _cut(pipe)
