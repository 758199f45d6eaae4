"""The serving recorder's overhead per request: the same requests with and without it, side by side.

    .venv/bin/python bench/serve_overhead.py [--cases flux,sdxl,wan] [--rounds 5]
    .venv/bin/python bench/serve_overhead.py --cases sd15-cpu --rounds 3     # real size (~8 min)
    .venv/bin/python bench/serve_overhead.py --floor     # and the bare request under an empty mode

A served request runs through ``Session.run(params, served=True)``: the recorder's hooks on every
component and repeated layer, its step callback, the exact CPU backend counting every tensor, the
record built and kept (``WarmupRecorder.served``). Without it, the same pipeline is called with
the same keywords (``Session.kwargs_for``, a fresh scheduler) and nothing else. The two alternate
request by request on one pipeline, timed in this thread's CPU seconds (one process, one torch
thread: other processes on a loaded machine count in neither), and each case prints the median
of each and their ratio; the goal (issue 40) is at most
2 % of a request on the CPU. Tiny examples are from ``calibration.examples``; ``sd15-cpu`` is SD 1.5
at its real size from its public config with random weights (``bench/realsize_archs.py``) at
256x256, 2 steps. ``--floor`` adds a third request per round: the bare one under an empty
``TorchDispatchMode`` (it only calls each op), torch's own cost of any Python dispatch mode, which
no work inside the recorder's mode can go under.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from calibration.calibrate.run import load_pipeline
from calibration.core.host import quiet_libraries
from calibration.core.session import Session
from calibration.examples import EXAMPLES

ROOT = Path(__file__).resolve().parent.parent
Point = dict[str, int | bool]
GOAL = 0.02  # the recorder's share of a served request
REAL = {"sd15-cpu": {"steps": 2, "height": 256, "width": 256}}
TINY = {
    "flux": {"steps": 2, "height": 64, "width": 64},
    "sdxl": {"steps": 2, "height": 64, "width": 64},
    "wan": {"steps": 2, "frames": 9, "height": 64, "width": 64},
}


class _EmptyMode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's is untyped
    """Calls each op and nothing else: the floor of any Python dispatch mode."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as the recorder's mode: no dynamo wrapper

    def __torch_dispatch__(
        self,
        func: Callable[..., object],
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        return func(*args, **(kwargs or {}))


def _session(name: str) -> tuple[Session, Point]:
    """The case's pipeline in a session (warmup ended: its requests are served ones)."""
    if name in REAL:
        from bench.realsize import CASES

        case = CASES[name]
        formulas = load_pipeline(ROOT / case.formula_file, case.pipeline)
        pipe = case.build(0, case.dtype)

        def call(seed: int) -> dict[str, object]:
            return {**case.call, "generator": torch.Generator("cpu").manual_seed(seed)}

        session = Session(pipe, formulas, "cpu", call_kwargs=call)  # type: ignore[arg-type]
        point = REAL[name]
    else:
        example = EXAMPLES[name]
        formulas = load_pipeline(ROOT / "formulas" / example.formula_file, example.pipeline)
        session = Session(example.build(0), formulas, "cpu", call_kwargs=example.call_kwargs)
        point = TINY[name]
    return session, {**formulas.default_workload, **point}


def _timed(run: Callable[[], object]) -> float:
    """The CPU seconds of this thread (torch on one thread computes on it): other processes on a
    loaded machine do not count, as they would in wall-clock seconds."""
    start = time.thread_time()
    run()
    return time.thread_time() - start


def measure(name: str, rounds: int, floor: bool = False) -> tuple[float, float, float | None]:
    """The median seconds of a request without and with the recorder, and under an empty mode
    when ``floor`` (``rounds`` each, alternating, after one of each to warm up)."""
    session, point = _session(name)
    session.run(point)  # warmup: the first request pays one-time costs
    session.recorder.end_warmup()

    def bare() -> object:
        from calibration.core.calls import reset_scheduler

        reset_scheduler(session.pipe)
        return session.pipe(**session.kwargs_for(point))

    def empty() -> object:
        with _EmptyMode():
            return bare()

    def recorded() -> object:
        record = session.run(point, served=True)
        if not record.ok:
            raise SystemExit(f"{name}: the recorded request failed: {record.error}")
        return record

    bare()
    without, with_, floors = [], [], []
    for _ in range(rounds):
        without.append(_timed(bare))
        if floor:
            floors.append(_timed(empty))
        with_.append(_timed(recorded))
    return (
        statistics.median(without),
        statistics.median(with_),
        statistics.median(floors) if floor else None,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(TINY), help=", ".join([*TINY, *REAL]))
    parser.add_argument("--rounds", type=int, default=7, help="requests of each kind, alternating")
    parser.add_argument("--floor", action="store_true", help="also under an empty dispatch mode")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    floor_head = " empty mode (CPU s) | floor |" if args.floor else ""
    print(
        f"| case | request | without (CPU s) | with (CPU s) | ratio | overhead | goal {GOAL:.0%} |"
        + floor_head
    )
    print("|---|---|---:|---:|---:|---:|---|" + ("---:|---:|" if args.floor else ""))
    worst = 0.0
    for name in args.cases.split(","):
        with quiet_libraries(), torch.inference_mode(False):
            without, with_, empty = measure(name, args.rounds, args.floor)
        ratio = with_ / without
        worst = max(worst, ratio - 1)
        point = ",".join(f"{k}={v}" for k, v in {**TINY, **REAL}[name].items())
        ok = "yes" if ratio - 1 <= GOAL else "no"
        floor_cells = "" if empty is None else f" {empty:.4f} | {empty / without - 1:+.1%} |"
        print(
            f"| {name} | {point} | {without:.4f} | {with_:.4f} | {ratio:.3f} | "
            f"{ratio - 1:+.1%} | {ok} |" + floor_cells,
            flush=True,
        )
    return 0 if worst <= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
