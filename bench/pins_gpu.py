"""Pins made as planned, on a CUDA device (issue 39, item 5): the tiny FLUX with every component
offloaded or streamed, every host copy planned pinned, applied to ``cuda``; after ``apply`` the
VAE's host copy is pinned (``next(pipe.vae.parameters()).is_pinned()``) and ``Applied`` measures
the plan's pinned bytes; after a request and ``undo`` nothing is pinned. A plan under a zero pin
budget (every copy pageable) pins nothing.

    .venv/bin/python bench/pins_gpu.py

Without CUDA it says pinning applies on CUDA only and exits 0. Exits 1 when a check fails.
"""

from __future__ import annotations


def _plan(pipe: object, pin_budget: int | None) -> object:
    from calibration.core.weights import pipeline_bytes
    from calibration.plan import Component, Device, Phase, Target
    from calibration.plan.solver import most_conservative

    weights, layers = pipeline_bytes(pipe, ("transformer",))  # type: ignore[arg-type]
    components = [
        Component(n, w, tuple(layers.get(n, {}).values()), tuple(layers.get(n, {})))
        for n, w in weights.items()
    ]
    stage = {"text_encoder": "t", "text_encoder_2": "t", "transformer": "d", "vae": "v"}
    phases = [Phase(s, 0, [n for n in weights if stage.get(n) == s]) for s in ("t", "d", "v")]
    target = Target("t", phases, layer_uses={"transformer": (1, 1)})
    device = Device(1 << 40, reserve_bytes=0, pin_budget_bytes=pin_budget)
    return most_conservative(components, [target], device)


def main() -> int:
    import torch

    from calibration.examples import EXAMPLES
    from calibration.placement.pins import CUDA_ONLY
    from calibration.plan.apply import apply

    if not torch.cuda.is_available():
        print(f"no CUDA device: {CUDA_ONLY}")
        return 0
    flux = EXAMPLES["flux"]
    pipe = flux.build(0)
    plan = _plan(pipe, None)
    applied = apply(plan, pipe, device="cuda", offload_device="cpu")  # type: ignore[arg-type]
    vae = next(pipe.vae.parameters()).is_pinned()
    print(
        f"after apply: vae pinned {vae}; pinned {applied.pinned_bytes} B measured, "
        f"{plan.pinned_bytes} B planned"
    )  # type: ignore[attr-defined]
    with torch.no_grad():
        pipe(**flux.call_kwargs(0), num_inference_steps=1, height=32, width=32)
    applied.offload_all()
    kept = next(pipe.vae.parameters()).is_pinned()
    applied.undo()
    after = any(t.is_pinned() for m in (pipe.vae, pipe.transformer) for t in m.parameters())
    print(f"after a request: vae pinned {kept}; after undo: any pinned {after}")
    pageable = _plan(flux.build(0), 0)
    other = flux.build(0)
    none = apply(pageable, other, device="cuda", offload_device="cpu")  # type: ignore[arg-type]
    paged = next(other.vae.parameters()).is_pinned()
    print(f"pin budget 0: vae pinned {paged}, pinned {none.pinned_bytes} B")
    none.undo()
    ok = vae and kept and not after and not paged and none.pinned_bytes == 0
    ok = ok and applied.pinned_bytes == 0  # released on undo
    print("pins made as planned" if ok else "PINS NOT AS PLANNED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
