"""One rank of the two-process test of ranks with different devices (its own module: spawned
children import it). Rank 0 is the tiny FLUX on a 1 MiB device; rank 1 the same FLUX with an IP
adapter's image encoder registered (a component rank 0 does not have) on a 64 MiB device."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.distributed as dist

from tests.gloo import gloo_rank

#: Each rank's device capacity (no reserve): rank 0 must stream, rank 1 keeps everything.
CAPS = (1 << 20, 64 << 20)


def with_image_encoder(seed: int = 0) -> object:
    """The tiny FLUX with a tiny random CLIP vision tower as its ``image_encoder`` (FluxPipeline's
    optional component)."""
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    from calibration.examples import EXAMPLES

    pipe = EXAMPLES["flux"].build(seed)
    torch.manual_seed(seed)
    config = CLIPVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
        projection_dim=16,
    )
    pipe.register_modules(  # type: ignore[attr-defined]  # diffusers' typing hides it
        image_encoder=CLIPVisionModelWithProjection(config).eval()
    )
    return pipe


def run_rank(rank: int, agreement: object) -> dict[str, object]:
    """Calibrate this rank's pipeline and run the lifecycle on this rank's device."""
    from calibration.core.session import Session
    from calibration.lifecycle.run import run_lifecycle
    from calibration.lifecycle.steps import Settings
    from calibration.plan.model import Device
    from tests.calibration.lifecycle_setup import FLUX, Steady, formulas, points

    pipe = with_image_encoder() if rank == 1 else FLUX.build(0)
    session = Session(pipe, formulas(), "cpu", call_kwargs=FLUX.call_kwargs, clock=Steady())  # type: ignore[arg-type]
    settings = Settings(Device(CAPS[rank], reserve_bytes=0), "apply", agreement=agreement)  # type: ignore[arg-type]
    outcome = run_lifecycle(session, points(), settings)
    report = outcome.report
    assert outcome.plan is not None
    return {
        "placement": dict(report.placement),
        "status": report.status,
        "validations": [s.outcome for s in report.step("validate")],
        "phases": [
            [u.label, u.bound_bytes, u.weights_bytes, u.headroom_bytes] for u in outcome.plan.phases
        ],
        "measured": report.step("validate")[-1].data["phases"],
        "usable": outcome.plan.device.usable_bytes,
        "plan": report.step("plan")[0].detail,
    }


def worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """This rank's lifecycle on gloo; writes what it ended on."""
    with gloo_rank(rank, world, port, 240):
        from runtime.measure.distributed import TorchDistributedAgreement

        result = run_rank(rank, TorchDistributedAgreement())
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))


#: Each rank's phases (label -> bound) of one target: "a" on both, "b" on rank 0 only, "c" on 1.
BOUNDS = ({"a": 10, "b": 5}, {"a": 7, "c": 3})


def bounds_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """Agree on ``BOUNDS`` and a failure over gloo; write what this rank ended with."""
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        from calibration.lifecycle.agree import cautious_bounds, gather_text, worst_failure
        from calibration.lifecycle.model import Failure
        from calibration.plan.model import Phase, Target
        from runtime.measure.distributed import TorchDistributedAgreement

        agreement = TorchDistributedAgreement()
        mine = Target("t", tuple(Phase(label, b) for label, b in BOUNDS[rank].items()))
        (agreed,) = cautious_bounds(agreement, [mine], "cpu/cpu/1")  # one kind: they agree
        failure = (Failure.NONE, Failure.TOO_SLOW)[rank]
        result = {
            "bounds": {p.label: p.bound_bytes for p in agreed.phases},
            "texts": gather_text(agreement, "x" * (rank + 1)),
            "failure": worst_failure(agreement, failure).value,
        }
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


#: The peer's 20 GiB and 100 GiB ranks, in KiB: each rank's capacity and its denoising phase's
#: activations (the larger device's kernels take far more workspace than the smaller one has).
OWN = ((20 << 10, 2 << 10), (100 << 10, 40 << 10))


def own_inputs(rank: int) -> tuple[tuple[object, ...], tuple[object, ...], object]:
    """Rank ``rank``'s components, target and device of the 20 vs 100 case (same components)."""
    from calibration.plan.model import Component, Device, Phase, Target

    capacity, activations = OWN[rank]
    transformer = Component.uniform("transformer", 16 << 10, 12, 1 << 10)  # 4 KiB rest
    components = (transformer, Component("text_encoder", 6 << 10), Component("vae", 1 << 10))
    phases = (
        Phase("encode", 1 << 10, ("text_encoder",)),
        Phase("denoise", activations, ("transformer",)),
        Phase("decode", 2 << 10, ("vae",)),
    )
    target = Target("steps=4", phases, layer_uses={"transformer": (4,) * 12})
    return components, (target,), Device(capacity, reserve_bytes=0)


def own_bounds_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """Agree on bounds by device kind and plan over gloo, as the lifecycle does (``_plan``)."""
    with gloo_rank(rank, world, port, 120):
        from calibration.lifecycle.agree import cautious_bounds, device_kind, plan_ranks
        from runtime.measure.distributed import TorchDistributedAgreement

        agreement = TorchDistributedAgreement()
        components, targets, device = own_inputs(rank)
        agreed = cautious_bounds(agreement, targets, device_kind("cpu", device))  # type: ignore[arg-type]
        plan, how = plan_ranks(agreement, components, agreed, device)  # type: ignore[arg-type]
        result = {
            "bounds": {p.label: p.bound_bytes for p in agreed[0].phases},
            "feasible": plan.feasible,
            "reason": plan.reason,
            "agreed": how,
            "headroom": [u.headroom_bytes for u in plan.phases],
            "usable": plan.device.usable_bytes,
        }
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
