"""On a CUDA device: does a planned pipeline's peak stay within what the plan predicts?

    .venv/bin/python bench/plan_gpu.py [--example flux|wan] [--squeeze 0.5]

Builds the tiny example pipeline, measures its activations once fully resident (the peak minus
the weights, the same bound for every phase: crude but an upper bound for this tiny model), plans
for a device squeezed below the resident total (so some components are offloaded or streamed),
applies the plan with `calibration.plan.apply.apply`, runs the request and compares
`torch.cuda.max_memory_allocated` with the plan's largest phase (weights on the device + bound).
Exit 0 within the prediction, 1 over it; prints `skipped` and exits 0 without CUDA.
"""

from __future__ import annotations

import argparse
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--example", choices=("flux", "wan"), default="flux")
    parser.add_argument("--squeeze", type=float, default=0.5, help="layer bytes to take away")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return 0
    from calibration.core.weights import pipeline_bytes
    from calibration.examples import EXAMPLES
    from calibration.plan import Component, Device, Phase, Target, solve
    from calibration.plan.apply import apply
    from calibration.plan.report import document, show_bytes

    example = EXAMPLES[args.example]
    shape = {"num_inference_steps": 4, "height": 128, "width": 128}
    if args.example == "wan":
        shape["num_frames"] = 17

    def run(pipe: object) -> int:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():
            pipe(**example.call_kwargs(0), **shape)  # type: ignore[operator]
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated())

    resident = example.build(0).to("cuda")
    weights, layers = pipeline_bytes(resident, ("transformer",))
    total = sum(weights.values())
    peak = run(resident)
    bound = max(0, peak - total)
    del resident
    torch.cuda.empty_cache()

    components = [
        Component(n, w, tuple(layers.get(n, {}).values()), tuple(layers.get(n, {})))
        for n, w in weights.items()
    ]
    phases = [Phase(name, bound, [name]) for name in weights]  # one phase per component
    target = Target("demo", phases)
    squeeze = int(args.squeeze * sum(sum(v.values()) for v in layers.values()))
    device = Device(total + bound - squeeze, reserve_bytes=0)
    plan = solve(components, [target], device)
    if not plan.feasible:
        print(f"nothing fits: {plan.reason}")
        return 1
    pipe = example.build(0)
    apply(plan, pipe, device="cuda", offload_device="cpu")
    measured = run(pipe)
    predicted = max(u.weights_bytes + u.bound_bytes for u in plan.phases)
    print(document(plan, components)["components"])
    print(
        f"resident peak {show_bytes(peak)}; planned: predicted {show_bytes(predicted)}, "
        f"measured {show_bytes(measured)} ({'within' if measured <= predicted else 'OVER'})"
    )
    return 0 if measured <= predicted else 1


if __name__ == "__main__":
    sys.exit(main())
