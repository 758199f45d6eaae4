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
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--example", choices=("flux",), default="flux")
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (a dry run)")
    args = parser.parse_args()
    import gc

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    from pathlib import Path

    from calibration.calibrate.run import calibrate_session, load_pipeline, shapes
    from calibration.core.calls import reset_scheduler
    from calibration.core.session import Session
    from calibration.examples import EXAMPLES
    from calibration.lifecycle.faults import Fault, FaultyBackend
    from calibration.lifecycle.render import lines
    from calibration.lifecycle.run import run_lifecycle
    from calibration.lifecycle.steps import Settings, plan_inputs
    from calibration.plan import Device, PlacementKind, solve
    from calibration.plan.apply import apply
    from runtime.measure.backends import backend_for
    from runtime.measure.diffusers_hooks import pipeline_modules

    torch.set_num_threads(1)
    example = EXAMPLES[args.example]
    root = Path(__file__).resolve().parents[1]
    formulas = load_pipeline(root / "formulas" / example.formula_file, example.pipeline)
    small = {"steps": 2, "height": 64, "width": 64}, {"steps": 1, "height": 32, "width": 32}
    points = shapes(formulas, example.shapes, target=small[0], probe=small[1])

    def session(faults: list[Fault]) -> Session:
        backend = FaultyBackend(backend_for(args.device), faults)
        made = Session(
            example.build(0),  # type: ignore[arg-type]  # a diffusers pipeline
            formulas,
            args.device,
            call_kwargs=example.call_kwargs,
            backend=backend,
        )
        backend.watch(made.recorder)
        return made

    def release(pipe: object, outcome: object = None) -> None:
        """One pipeline on the device at a time, as in a worker: the others' weights would count."""
        applied = getattr(outcome, "applied", None)
        if applied is not None:
            applied.undo()
        pipe.to("cpu")  # type: ignore[attr-defined]
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    first = session([])
    cal = calibrate_session(
        first,
        target=points.target,
        probe=points.probe,
        warmup=points.warmup,
        repeat=1,
        time_tolerance=None,
    )
    release(first.pipe)
    components, targets = plan_inputs(cal)
    full = sum(c.weight_bytes for c in components) + max(p.bound_bytes for p in targets[0].phases)
    device = None
    for k in range(400):  # the largest capacity whose plan streams layers
        candidate = Device(full - full * k // 400, reserve_bytes=0)
        plan = solve(components, targets, candidate)
        if plan.feasible and any(p.kind == PlacementKind.LAYERWISE for p in plan.placements):
            device = candidate
            break
    if device is None:
        print("no capacity makes the plan stream")
        return 1
    print(f"## capacity {device.capacity_bytes:,} B: the plan streams")
    ok = True

    streams = plan
    used = session([])
    streaming = run_lifecycle(used, points, Settings(device), calibration=cal)
    print("\n".join(lines(streaming.report)))
    ok &= streaming.report.validated and _validations(streaming) == ["holds"]
    release(used.pipe, streaming)

    print("## out of memory injected in the denoising stage, once")
    used = session([Fault("DenoisingStage", times=1)])
    faulted = run_lifecycle(used, points, Settings(device), calibration=cal)
    print("\n".join(lines(faulted.report)))
    release(used.pipe, faulted)
    ok &= faulted.report.validated and _validations(faulted)[0] == "out-of-memory"
    ok &= bool(faulted.report.step("rollback"))

    print("## undo")

    def images(pipe: object) -> torch.Tensor:
        reset_scheduler(pipe)  # type: ignore[arg-type]
        torch.manual_seed(0)
        with torch.no_grad():
            return pipe(  # type: ignore[operator, no-any-return]
                **example.call_kwargs(0), num_inference_steps=2, height=64, width=64
            ).images

    untouched = example.build(0).to(args.device)  # type: ignore[attr-defined]
    expected = images(untouched)
    release(untouched)
    pipe = session([]).pipe  # on the device, as a worker's
    before = {n: {p.device for p in m.parameters()} for n, m in pipeline_modules(pipe).items()}
    applied = apply(streams, pipe, device=args.device)
    under = images(pipe)
    applied.undo()
    after = {n: {p.device for p in m.parameters()} for n, m in pipeline_modules(pipe).items()}
    undone = images(pipe)
    same = torch.equal(under.cpu(), expected.cpu()), torch.equal(undone.cpu(), expected.cpu())
    print(f"devices restored: {before == after}; images equal under the plan, after undo: {same}")
    ok &= before == after and same[1]
    print(f"lifecycle on {args.device}: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


def _validations(outcome: object) -> list[str]:
    report = outcome.report  # type: ignore[attr-defined]
    return [s.outcome for s in report.step("validate")]


if __name__ == "__main__":
    sys.exit(main())
