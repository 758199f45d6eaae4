"""The serving lifecycle on a real device: a plan that must stream, validated; one forced to fail
(an out-of-memory error injected at the memory backend) that rolls back and re-plans; undo.

    .venv/bin/python bench/lifecycle_gpu.py [--device cuda]

Calibrates the tiny FLUX once on the device (two steps at 64x64, the docs' shapes), picks the
largest device capacity whose plan streams layers of a component, and runs
``calibration.lifecycle.run.run_lifecycle`` on fresh pipelines: (1) as is: the streaming plan must
validate (the measured phase peaks, from the allocator, within the plan's predictions); (2) with
``FaultyBackend`` raising ``torch.OutOfMemoryError`` in the denoising stage once: the report must
show the rollback and a validated re-plan. (3) Undo: after ``undo()`` every parameter is back on
its device and the images equal the untouched pipeline's. Prints every report; exit 0 when all
three hold, 1 otherwise; without CUDA (and no ``--device cpu``) prints ``skipped`` and exits 0.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs
import torch

from calibration.calibrate.run import Calibration, calibrate_session, load_pipeline, shapes
from calibration.core.calls import reset_scheduler
from calibration.core.session import Session
from calibration.core.shapes import Shapes
from calibration.examples import EXAMPLES, Example
from calibration.lifecycle.faults import Fault, FaultyBackend
from calibration.lifecycle.render import lines
from calibration.lifecycle.run import Outcome, run_lifecycle
from calibration.lifecycle.steps import Settings, plan_inputs
from calibration.plan import Device, PlacementKind, solve
from calibration.plan.apply import apply
from calibration.plan.model import Component, Plan, Target
from runtime import Pipeline
from runtime.measure.backends import backend_for
from runtime.measure.diffusers_hooks import pipeline_modules

ROOT = Path(__file__).resolve().parents[1]


@attrs.frozen
class Bench:
    """What every step reads: the device, the example, its formulas and the request shapes."""

    device: str
    example: Example
    formulas: Pipeline
    points: Shapes

    def session(self, faults: Sequence[Fault] = ()) -> Session:
        """A fresh pipeline on the device, its memory backend failing as `faults` say."""
        backend = FaultyBackend(backend_for(self.device), faults)
        made = Session(
            self.example.build(0),  # type: ignore[arg-type]  # a diffusers pipeline
            self.formulas,
            self.device,
            call_kwargs=self.example.call_kwargs,
            backend=backend,
        )
        backend.watch(made.recorder)
        return made

    def images(self, pipe: object) -> torch.Tensor:
        """The images of the two-step 64x64 request, seeded."""
        reset_scheduler(pipe)  # type: ignore[arg-type]
        torch.manual_seed(0)
        with torch.no_grad():
            return pipe(  # type: ignore[operator, no-any-return]
                **self.example.call_kwargs(0), num_inference_steps=2, height=64, width=64
            ).images


def release(pipe: object, outcome: Outcome | None = None) -> None:
    """One pipeline on the device at a time, as in a worker: the others' weights would count."""
    if outcome is not None and outcome.applied is not None:
        outcome.applied.undo()
    pipe.to("cpu")  # type: ignore[attr-defined]
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def bench_for(example_name: str, device: str) -> Bench:
    """The example's formulas and the docs' small shapes (two steps at 64x64, a probe at 32x32)."""
    example = EXAMPLES[example_name]
    formulas = load_pipeline(ROOT / "formulas" / example.formula_file, example.pipeline)
    small = {"steps": 2, "height": 64, "width": 64}, {"steps": 1, "height": 32, "width": 32}
    points = shapes(formulas, example.shapes, target=small[0], probe=small[1])
    return Bench(device, example, formulas, points)


def calibrated(bench: Bench) -> Calibration:
    """The example calibrated once on the device."""
    first = bench.session()
    points = bench.points
    cal = calibrate_session(
        first,
        target=points.target,
        probe=points.probe,
        warmup=points.warmup,
        repeat=1,
        time_tolerance=None,
    )
    release(first.pipe)
    return cal


def streaming_device(
    components: tuple[Component, ...], targets: tuple[Target, ...]
) -> tuple[Device, Plan] | None:
    """The largest capacity (in 400 steps down from everything resident) whose plan streams
    layers of a component, and that plan; None when none does."""
    full = sum(c.weight_bytes for c in components) + max(p.bound_bytes for p in targets[0].phases)
    for k in range(400):
        candidate = Device(full - full * k // 400, reserve_bytes=0)
        plan = solve(components, targets, candidate)
        if plan.feasible and any(p.kind == PlacementKind.LAYERWISE for p in plan.placements):
            return candidate, plan
    return None


def streaming_holds(bench: Bench, device: Device, cal: Calibration) -> bool:
    """(1) The streaming plan, validated on the first try."""
    used = bench.session()
    streaming = run_lifecycle(used, bench.points, Settings(device), calibration=cal)
    print("\n".join(lines(streaming.report)))
    release(used.pipe, streaming)
    return streaming.report.validated and validations(streaming) == ["holds"]


def fault_rolls_back(bench: Bench, device: Device, cal: Calibration) -> bool:
    """(2) An out-of-memory error in the denoising stage: rolled back, re-planned, validated."""
    print("## out of memory injected in the denoising stage, once")
    used = bench.session([Fault("DenoisingStage", times=1)])
    faulted = run_lifecycle(used, bench.points, Settings(device), calibration=cal)
    print("\n".join(lines(faulted.report)))
    release(used.pipe, faulted)
    ok = faulted.report.validated and validations(faulted)[0] == "out-of-memory"
    return ok and bool(faulted.report.step("rollback"))


def undo_restores(bench: Bench, plan: Plan) -> bool:
    """(3) After `undo()` every parameter is back on its device and the images equal the
    untouched pipeline's."""
    print("## undo")
    untouched = bench.example.build(0).to(bench.device)  # type: ignore[attr-defined]
    expected = bench.images(untouched)
    release(untouched)
    pipe = bench.session().pipe  # on the device, as a worker's
    before = {n: {p.device for p in m.parameters()} for n, m in pipeline_modules(pipe).items()}
    applied = apply(plan, pipe, device=bench.device)
    under = bench.images(pipe)
    applied.undo()
    after = {n: {p.device for p in m.parameters()} for n, m in pipeline_modules(pipe).items()}
    undone = bench.images(pipe)
    same = torch.equal(under.cpu(), expected.cpu()), torch.equal(undone.cpu(), expected.cpu())
    print(f"devices restored: {before == after}; images equal under the plan, after undo: {same}")
    return before == after and same[1]


def validations(outcome: Outcome) -> list[str]:
    """Each validation's outcome, in order."""
    return [s.outcome for s in outcome.report.step("validate")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--example", choices=("flux",), default="flux")
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (a dry run)")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    torch.set_num_threads(1)
    bench = bench_for(args.example, args.device)
    cal = calibrated(bench)
    found = streaming_device(*plan_inputs(cal))
    if found is None:
        print("no capacity makes the plan stream")
        return 1
    device, plan = found
    print(f"## capacity {device.capacity_bytes:,} B: the plan streams")
    ok = streaming_holds(bench, device, cal)
    ok &= fault_rolls_back(bench, device, cal)
    ok &= undo_restores(bench, plan)
    print(f"lifecycle on {args.device}: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
