"""Fuzzing of the lifecycle (`dslc plan --validate`'s ``run_lifecycle``, shared by
bench/lifecycle_fuzz.py and tests/calibration/lifecycle/test_lifecycle_fuzz.py).

A case is drawn from a seed: a tiny example (FLUX or SDXL), a device capacity (one where the tiny
FLUX's VAE is grouped among them), a mode, a clock (``Steady``, ``Slowing``: every reading a little
longer than the last, so every request is slower than the one before, or the real CPU clock), and a
fault on one rank at one lifecycle step (a component's move failing while a plan is applied (out of
memory, an error, an interrupt), a request failing or reading high or slow in a stage, a hook that
fails to come off at undo or at a rollback, an interrupt, a re-warm failing, a rank stalled past
the others' timeout). ``run_rank`` runs this rank's lifecycle on a fresh pipeline and says where it
ended: the report's status, whether it serves and with what, what escaped (an interrupt is
expected, anything else is a traceback from the internals), and which components are not as they
were (hooks, forward overrides, tensors' devices and dtypes) after a failed run, or after the
served plan is undone.
"""

from __future__ import annotations

import enum
import functools
import json
import random
import socket
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import asdict, frozen

from calibration.fuzzing.lifecycle_checks import changed, snapshot
from calibration.fuzzing.lifecycle_guard import Shared, beater

if TYPE_CHECKING:
    from torch import nn

    from calibration.calibrate.run import Calibration
    from calibration.core.session import Session
    from calibration.core.shapes import Shapes
    from calibration.lifecycle.faults import Fault
    from calibration.lifecycle.run import Outcome
    from runtime import Pipeline


#: Where a fault strikes: a move while a plan is applied (the first, or any of the next few), a
#: request, a hook failing to come off (at the final undo, or at a rollback forced by an
#: out-of-memory error), an interrupt in a request, a rank stalled past the others' timeout, the
#: request after the first (the re-warm when the first validation held) failing.
class Step(enum.Enum):
    """The lifecycle step a case's fault strikes."""

    APPLY, TO, REQUEST, UNDO = "apply", "to", "request", "undo"
    ROLLBACK, INTERRUPT, LATE, REWARM = "rollback", "interrupt", "late", "re-warm"


STEPS = tuple(s.value for s in Step)
#: The steps whose fault is a component's failing move (its kind: out of memory or an error).
MOVES = frozenset({Step.APPLY, Step.TO})
#: The steps whose fault kind the summary names.
KINDED = MOVES | {Step.REQUEST, Step.REWARM}
REQUEST_KINDS = ("out-of-memory", "error", "peak", "slow")
#: A failing move's kinds: out of memory, an error, an interrupt (``KeyboardInterrupt`` from the
#: component's ``.to()``: every rank stops, the interrupted one raises it).
MOVE_KINDS = ("out-of-memory", "error", "interrupt")
STAGES = ("TextEncodingStage", "DenoisingStage", "DecodingStage")
REAL = "real"  # the recorder's own clock (this thread's CPU time)
CLOCKS = ("steady", "slowing", REAL)
EXAMPLES = ("flux", "sdxl")
MODES = ("apply", "strict", "plan")
#: Where the tiny FLUX's planner groups the VAE: below its decode's peak with the VAE whole
#: (about 761 KiB), above it with the VAE grouped (tests/calibration/cli/test_grouped_cli.py).
GROUPED_CAP = 720 << 10
CAPACITIES = (GROUPED_CAP, 1 << 20, 3 << 20, 64 << 20)
#: The components a fault may pick (each example names its own; a name it lacks is skipped).
COMPONENTS = ("transformer", "unet", "vae", "text_encoder", "text_encoder_2")
#: The rank timeout a 2-rank case sets (seconds); a late rank stalls 1.5 times as long.
RANK_TIMEOUT_S = 20.0
#: Small shapes for each example: a probe, the target (the warmup too).
SIZES = {
    "flux": ({"steps": 1, "height": 32, "width": 32}, {"steps": 2, "height": 64, "width": 64}),
    "sdxl": ({"steps": 1, "height": 32, "width": 32}, {"steps": 2, "height": 64, "width": 64}),
}


@frozen
class Case:
    """One drawn case: where the fault strikes (``step`` on ``rank`` of ``ranks``) and how."""

    index: int
    example: str
    ranks: int
    rank: int
    step: str
    kind: str
    stage: str
    times: int | None
    component: str
    clock: str
    mode: str
    capacity: int

    @property
    def label(self) -> str:
        """The fault's kind in the summary table."""
        return f"{self.step}:{self.kind}" if Step(self.step) in KINDED else self.step


def draw(seed: int, index: int, *, ranks: int | None = None) -> Case:
    """Case ``index`` of ``seed`` (the same every time); ``ranks`` forces 1 or 2 ranks."""
    rng = random.Random(f"{seed}:{index}")
    world = ranks if ranks is not None else rng.choice((1, 1, 1, 2))
    step = rng.choice([s for s in Step if world == 2 or s is not Step.LATE])
    kind = rng.choice(REQUEST_KINDS) if step is Step.REQUEST else ""
    if step in MOVES:
        kind = rng.choice(MOVE_KINDS)
    if step is Step.REWARM:
        kind = rng.choice(REQUEST_KINDS[:2])
    times = rng.choice((1, 1, 2, 3, None)) if step is Step.REQUEST else rng.choice((1, 2, 4, 12))
    return Case(
        index=index,
        example=rng.choice(EXAMPLES),
        ranks=world,
        rank=rng.randrange(world),
        step=step.value,
        kind=kind,
        stage=rng.choice(STAGES),
        times=times,
        component=rng.choice(COMPONENTS),
        clock="steady" if world == 2 and rng.random() < 0.5 else rng.choice(CLOCKS),
        mode=rng.choice(MODES),
        capacity=rng.choice(CAPACITIES),
    )


def as_dict(case: Case) -> dict[str, object]:
    """The case as JSON (a replay's input)."""
    return asdict(case)


class Steady:
    """A clock that advances ``step_s`` a reading, whatever runs in between: the same times
    under any load."""

    def __init__(self, step_s: float = 1e-3) -> None:
        self.now, self.step_s = 0.0, step_s

    def __call__(self) -> float:
        self.now += self.step_s
        return self.now


class Slowing(Steady):
    """A steady clock whose step grows by ``growth`` a reading: every request reads slower than
    the one before (a machine slowing down)."""

    def __init__(self, growth: float = 1e-3) -> None:
        super().__init__()
        self.growth = growth

    def __call__(self) -> float:
        self.step_s *= 1.0 + self.growth
        return super().__call__()


def clock(name: str) -> Callable[[], float] | str:
    """The clock called ``name`` (``real``: the recorder's own CPU clock)."""
    return {"steady": Steady, "slowing": Slowing}.get(name, lambda: "auto")()


@functools.cache
def formulas(root: str, example: str) -> Pipeline:
    """``example``'s formulas from ``root`` (the repository's formulas/), compiled once."""
    from calibration.calibrate.run import load_pipeline
    from calibration.examples import EXAMPLES as KNOWN

    chosen = KNOWN[example]
    return load_pipeline(Path(root) / chosen.formula_file, chosen.pipeline)


def points(root: str, example: str) -> Shapes:
    """``example``'s warmup, probe and target at ``SIZES``."""
    from calibration.calibrate.run import shapes
    from calibration.examples import EXAMPLES as KNOWN

    probe, target = SIZES[example]
    return shapes(formulas(root, example), KNOWN[example].shapes, target=target, probe=probe)


def session(
    root: str,
    example: str,
    faults: tuple[Fault, ...],
    clock_name: str,
    beat: Callable[[], None] = lambda: None,
) -> tuple[Session, object]:
    """A fresh tiny ``example`` on the CPU, recorded through the exact CPU backend with
    ``faults``, on the clock named ``clock_name``; the session and its faulty backend. Every
    counter read calls ``beat`` (the fuzzer's hang guard sees the rank progress)."""
    from calibration.core.session import Session
    from calibration.examples import EXAMPLES as KNOWN
    from calibration.fuzzing.lifecycle_beating import Beating
    from calibration.lifecycle.faults import FaultyBackend
    from runtime.measure.backends import LiveTensorBackend

    chosen = KNOWN[example]
    backend = FaultyBackend(Beating(LiveTensorBackend(), beat), faults)
    built = Session(
        chosen.build(0),  # type: ignore[arg-type]
        formulas(root, example),
        "cpu",
        call_kwargs=chosen.call_kwargs,
        backend=backend,
        clock=clock(clock_name),
    )
    backend.watch(built.recorder)
    return built, backend


@functools.cache
def calibration(
    root: str, example: str, real: bool, beat: Callable[[], None] = lambda: None
) -> Calibration:
    """One calibration of ``example`` (a round, no time probe) on a steady or the real clock,
    shared by the cases of a process (``beat``: as ``session``'s)."""
    from calibration.calibrate.run import calibrate_session

    measured, _ = session(root, example, (), "real" if real else "steady", beat)
    p = points(root, example)
    return calibrate_session(
        measured, target=p.target, probe=p.probe, warmup=p.warmup, repeat=1, time_tolerance=None
    )


def _interrupt() -> None:
    raise KeyboardInterrupt


def _stick(module: nn.Module, times: int) -> None:
    """A hook that fails to come off ``times`` times, on ``module`` when the plan in force hooked
    it (one the plan left alone is no part of any undo)."""
    from calibration.lifecycle.faults import failing_detach
    from calibration.placement.mechanisms import has_offload_hooks

    if has_offload_hooks(module):
        failing_detach(module, times)


def faults(case: Case, pipe: object) -> tuple[Fault, ...]:
    """The case's fault on this rank's ``pipe`` (a ``failing_to`` is installed here)."""
    import torch

    from calibration.lifecycle.faults import CALL, OUT_OF_MEMORY, PEAK, SLOW, Fault, failing_to
    from runtime.measure.diffusers_hooks import pipeline_modules

    modules = pipeline_modules(pipe)  # type: ignore[arg-type]
    module = modules.get(case.component) or modules[min(modules)]
    times, step = case.times or 1, Step(case.step)
    if step in MOVES:
        error = {OUT_OF_MEMORY: torch.OutOfMemoryError, "interrupt": KeyboardInterrupt}.get(
            case.kind, RuntimeError
        )
        failing_to(module, lambda: error(f"{case.kind} moving (injected)"), times)
        return ()
    if step is Step.REQUEST:
        extra = 8 << 20 if case.kind == PEAK else 0
        delay = 0.05 if case.kind == SLOW else 0.0
        return (Fault(case.stage, case.kind, extra_bytes=extra, times=case.times, delay_s=delay),)
    if step is Step.INTERRUPT:
        return (Fault(case.stage, CALL, times=1, action=_interrupt),)
    if step is Step.REWARM:  # out of memory or an error in the second request
        return (Fault(case.stage, case.kind, times=1, after=1),)
    if step is Step.LATE:
        late = functools.partial(time.sleep, RANK_TIMEOUT_S * 1.5)
        return (Fault(case.stage, CALL, times=1, action=late),)
    stick = Fault(case.stage, CALL, times=1, action=functools.partial(_stick, module, times))
    if step is Step.UNDO:
        return (stick,)
    return (stick, Fault(case.stage, OUT_OF_MEMORY, times=1))  # rollback


def _ended(outcome: Outcome) -> dict[str, object]:
    report = outcome.report
    return {
        "status": report.status,
        "serving": report.serving,
        "placement": dict(report.placement),
        "steps": [str(s.name) for s in report.steps],
        "left": sorted(dict(report.left_in_place)),
        "verdict": report.verdict,
    }


def _undo(outcome: Outcome, tries: int = 32) -> str:
    """Take the served plan off (retrying a hook that fails to come off); "" or why not."""
    from calibration.plan.apply import UndoError

    if outcome.applied is None:
        return ""
    for _ in range(tries):
        try:
            outcome.applied.undo()
            return ""
        except UndoError as exc:
            why = str(exc)
    return why


def run_rank(
    case: Case,
    root: str,
    rank: int = 0,
    agreement: object = None,
    beat: Callable[[], None] = lambda: None,
) -> dict[str, object]:
    """This rank's lifecycle of ``case`` on a fresh pipeline; where it ended, what escaped, and
    the components not as they were (after a failed run, or once the served plan is undone).
    ``beat``: called at every memory counter read (the hang guard's progress)."""
    from calibration.lifecycle.run import run_lifecycle
    from calibration.lifecycle.steps import Settings
    from calibration.plan.model import Device
    from runtime.measure.distributed import LOCAL

    fresh, backend = session(root, case.example, (), case.clock, beat)
    mine = faults(case, fresh.pipe) if rank == case.rank else ()
    backend.faults = mine  # type: ignore[attr-defined]
    before = snapshot(fresh.pipe)
    settings = Settings(
        Device(case.capacity, reserve_bytes=0),
        case.mode,
        agreement=LOCAL if agreement is None else agreement,  # type: ignore[arg-type]
        rank_timeout_s=RANK_TIMEOUT_S if case.ranks > 1 else None,
    )
    cal = calibration(root, case.example, case.clock == REAL, beat)
    result: dict[str, object] = {"rank": rank}
    outcome = None
    try:
        outcome = run_lifecycle(fresh, points(root, case.example), settings, calibration=cal)
        result.update(_ended(outcome))
    except KeyboardInterrupt:
        result["interrupted"] = True
    except BaseException:  # noqa: BLE001 - what escaped is the finding
        result["escaped"] = traceback.format_exc(limit=-8)
    if outcome is not None and outcome.applied is not None:
        result["undo"] = _undo(outcome)
    result["changed"] = changed(before, fresh.pipe)
    return result


def free_port() -> int:
    """A free TCP port on this host for a gloo group."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_process(
    rank: int,
    world: int,
    port: int,
    case: dict[str, object],
    root: str,
    folder: str,
    beats: Shared | None = None,
) -> None:
    """One gloo rank of ``case`` (a spawned process): writes ``folder/rankN.json``; counts its
    progress in ``beats`` (shared with the fuzzer's hang guard)."""
    from runtime.measure.distributed import TorchDistributedAgreement, gloo_rank

    with gloo_rank(rank, world, port, timeout_s=600):
        agreement = TorchDistributedAgreement()
        result = run_rank(Case(**case), root, rank, agreement, beater(beats))  # type: ignore[arg-type]
    Path(folder, f"rank{rank}.json").write_text(json.dumps(result))


def rank_in(rank: int, world: int, port: int, folder: str) -> None:
    """``rank_process`` of the case in ``folder/case.json`` (``{"case": ..., "root": ...}``):
    the worker signature of the tests' ``run_ranks``."""
    given = json.loads(Path(folder, "case.json").read_text())
    rank_process(rank, world, port, given["case"], given["root"], folder)
