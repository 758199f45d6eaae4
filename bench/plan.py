"""Residency planner: solve time, and our plan's transfer beside a greedy (accelerate-style) one.

    .venv/bin/python bench/plan.py [--budget-s 10]

Real model sizes (bf16 checkpoints; see bench/README.md for the sources) with activations from
the formulas' default workloads times per-unit constants measured on the tiny calibrations
(`dslc calibrate --json`, `--example flux --json`), scaled by the real/tiny width ratio.
"""

from __future__ import annotations

import argparse
import platform
import random
import signal
import statistics
import time
from collections.abc import Sequence
from types import FrameType

from calibration.plan import (
    Component,
    Device,
    GiB,
    Phase,
    PlacementKind,
    Target,
    solve,
)
from calibration.plan.candidates import Candidate, candidates
from calibration.plan.report import show_bytes

GB = 10**9
# Measured on the tiny pipelines (fp32): the fit slopes of their stage peaks (bytes per unit of
# the stage's memory measure), divided by the tiny model's width; real = constant x real width.
FLUX_DENOISE_PER_TOKEN = 2584 / 32  # B per token per hidden unit (tiny hidden 2 x 16)
FLUX_DECODE_PER_PIXEL = 163.047 / 8  # B per pixel per decoder channel (tiny channels 8)
WAN_PER_TOKEN_UNIT = 2308 / 24  # B per token per hidden unit (tiny hidden 2 x 12)
WAN_DECODE_PER_PIXEL = 2538.2 / 16  # B per pixel per VAE base channel (tiny base_dim 16)


def flux() -> tuple[list[Component], Target]:
    """FLUX.1-dev at 1024x1024, 28 steps: T5-XXL, CLIP-L, a 19+38-block transformer, the VAE."""
    tokens = (1024 // 16) ** 2 + 512
    denoise = int(FLUX_DENOISE_PER_TOKEN / 2 * 3072 * tokens)  # bf16: half of fp32
    decode = int(FLUX_DECODE_PER_PIXEL / 2 * 128 * 1024 * 1024)  # 128 channels at full size
    comps = [
        Component.uniform("transformer", int(23.8 * GB), 57, int(23.8 * GB * 0.98) // 57),
        Component.uniform("text_encoder_2", int(9.5 * GB), 24, int(9.5 * GB * 0.95) // 24),
        Component("text_encoder", int(0.25 * GB)),
        Component("vae", int(0.17 * GB)),
    ]
    phases = [
        Phase("TextEncodingStage", GiB // 2, ["text_encoder", "text_encoder_2"]),
        Phase("DenoisingStage", denoise, ["transformer"]),
        Phase("DecodingStage", decode, ["vae"]),
    ]
    uses = {"transformer": (28,) * 57, "text_encoder_2": (1,) * 24}
    return comps, Target("steps=28,1024x1024", phases, layer_uses=uses)


def wan(
    frames: int = 81, height: int = 480, width: int = 832, steps: int = 50
) -> tuple[list[Component], Target]:
    """Wan2.1 T2V 14B at its default workload: UMT5-XXL, a 40-block transformer, the Wan VAE."""
    latent_frames = (frames - 1) // 4 + 1
    tokens = latent_frames * (height // 16) * (width // 16)
    denoise = int(WAN_PER_TOKEN_UNIT / 2 * 5120 * tokens)
    # the Wan VAE runs in fp32 (base_dim 96), plus the decoded video (3 channels, fp32)
    decode = int(WAN_DECODE_PER_PIXEL * 96 * height * width + 12 * frames * height * width)
    comps = [
        Component.uniform("transformer", int(28.6 * GB), 40, int(28.6 * GB * 0.98) // 40),
        Component.uniform("text_encoder", int(11.4 * GB), 24, int(11.4 * GB * 0.93) // 24),
        Component("vae", int(0.25 * GB)),
    ]
    phases = [
        Phase("TextEncodingStage", GiB // 2, ["text_encoder"]),
        Phase("DenoisingStage", denoise, ["transformer"]),
        Phase("DecodingStage", decode, ["vae"]),
    ]
    uses = {"transformer": (2 * steps,) * 40, "text_encoder": (2,) * 24}  # CFG: two passes
    return comps, Target(f"steps={steps},{frames}x{height}x{width}", phases, layer_uses=uses)


def greedy(
    components: Sequence[Component], targets: Sequence[Target], device: Device
) -> list[Candidate]:
    """accelerate-style: largest first, each as much as fits in what the weights alone may use
    (usable minus the largest phase bound and one streaming buffer), layers in order, the rest
    of a component offloaded (whole, or its layers streamed)."""
    worst = max(p.bound_bytes for t in targets for p in t.phases)
    buffer = max((max(c.layer_bytes) for c in components if c.layer_bytes), default=0)
    budget = device.usable_bytes - worst - buffer
    picked: dict[str, Candidate] = {}
    for c in sorted(components, key=lambda c: -c.weight_bytes):
        cands = candidates(c, targets)
        fitting = [x for x in cands if x.always <= budget and x.kind != PlacementKind.OFFLOADED]
        choice = fitting[0] if fitting else cands[-1]
        budget -= choice.always
        picked[c.name] = choice
    return [picked[c.name] for c in components]


def fits(
    components: Sequence[Component],
    picked: Sequence[Candidate],
    targets: Sequence[Target],
    device: Device,
) -> str | None:
    """None, or the first phase the placement overflows."""
    names = [c.name for c in components]
    always = sum(x.always for x in picked)
    for t in targets:
        for p in t.phases:
            onload = sum(picked[names.index(n)].onload for n in set(p.active_components))
            if always + onload + p.bound_bytes > device.usable_bytes:
                return p.label
    return None


def summary(kind: PlacementKind, kept: int, layers: int) -> str:
    return (
        {PlacementKind.RESIDENT: "R", PlacementKind.OFFLOADED: "O", PlacementKind.GROUPED: "G"}.get(
            kind, f"L{kept}/{layers}"
        )
        if kind != PlacementKind.LAYERWISE
        else f"L{kept}/{layers}"
    )


def compare() -> None:
    print(
        f"{'model':6} {'device':>7}  {'ours ms/req':>11}  {'ours':34}  "
        f"{'greedy ms/req':>13}  greedy"
    )
    for name, (comps, target) in (("flux", flux()), ("wan", wan())):
        for gib in (24, 48, 80):
            device = Device(gib * GiB)
            ours = solve(comps, [target], device)
            mine = (
                " ".join(
                    f"{p.component}:{summary(p.kind, len(p.resident_layers), p.layers)}"
                    for p in ours.placements
                )
                if ours.feasible
                else "infeasible"
            )
            picked = greedy(comps, [target], device)
            overflow = fits(comps, picked, [target], device)
            cost = sum(x.cost for x in picked)
            theirs = " ".join(
                f"{c.name}:{summary(x.kind, x.kept, len(c.layer_bytes))}"
                for c, x in zip(comps, picked)
            )
            ours_ms = f"{ours.transfer_s * 1000:.0f}" if ours.feasible else "-"
            greedy_ms = (
                f"{cost / device.bandwidth_bytes_per_s * 1000:.0f}"
                if overflow is None
                else f"overflows {overflow}"
            )
            print(f"{name:6} {gib:>4} GiB  {ours_ms:>11}  {mine:34}  {greedy_ms:>13}  {theirs}")
        print(
            f"  ({name} phase bounds: "
            + ", ".join(f"{p.label} {show_bytes(p.bound_bytes)}" for p in target.phases)
            + ")"
        )


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Timeout


def timed(
    components: Sequence[Component], targets: Sequence[Target], device: Device, budget_s: float
) -> tuple[float, int, float, bool] | None:
    """Seconds, search nodes, CPU seconds of one solve and whether it is proven the least (the
    search finished within its limits), or None past the budget."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, budget_s)
    start, cpu = time.perf_counter(), time.process_time()
    try:
        plan = solve(components, targets, device)
        return time.perf_counter() - start, plan.nodes, time.process_time() - cpu, plan.proven
    except _Timeout:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def random_instance(seed: int, tied: bool, uneven: bool = False) -> tuple[list[Component], Target]:
    """10 components x 100 uniform layers, one phase each; uses per layer 1..100, or (tied)
    drawn from {1, 2, 50} so several components share a density; or (uneven) every layer its own
    size (50-400 MiB) and its own uses (1..100): a harder knapsack than any pipeline's."""
    rng = random.Random(seed)
    comps, uses = [], {}
    for i in range(10):
        if uneven:
            sizes = [rng.randint(50, 400) << 20 for _ in range(100)]
            comps.append(Component(f"c{i}", sum(sizes) + rng.randint(0, GiB), sizes))
            uses[f"c{i}"] = tuple(rng.randint(1, 100) for _ in range(100))
            continue
        layer = rng.randint(50, 400) << 20
        comps.append(Component.uniform(f"c{i}", layer * 100 + rng.randint(0, GiB), 100, layer))
        uses[f"c{i}"] = (rng.choice([1, 2, 50]) if tied else rng.randint(1, 100),) * 100
    phases = [Phase(f"p{i}", rng.randint(0, 20) * GiB, [f"c{i}"]) for i in range(10)]
    return comps, Target("t", phases, layer_uses=uses)


def solve_times(budget_s: float) -> None:
    print(f"\nsolve time (budget {budget_s:g} s a solve; '-' = over budget)")
    print(
        f"{'instances':24} {'solves':>6} {'median ms':>10} {'max ms':>8} {'over':>5} "
        f"{'nodes med':>10} {'nodes max':>10} {'cpu max':>8} {'unproven':>8}  ms per solve"
    )
    for label, make in (
        ("flux, real sizes", lambda s: flux()),
        ("wan, real sizes", lambda s: wan()),
        ("10x100, distinct uses", lambda s: random_instance(s, tied=False)),
        ("10x100, tied uses", lambda s: random_instance(s, tied=True)),
        ("10x100, uneven layers", lambda s: random_instance(s, tied=False, uneven=True)),
    ):
        results = []
        for seed in range(3):
            comps, target = make(seed)
            for gib in (24, 48, 80, 160):
                results.append(timed(comps, [target], Device(gib * GiB), budget_s))
        done = [r for r in results if r is not None]
        ms = [r[0] * 1000 for r in done]
        nodes = [r[1] for r in done]
        each = " ".join(f"{r[0] * 1000:.0f}" if r else "-" for r in results)
        print(
            f"{label:24} {len(results):>6} "
            + (
                f"{statistics.median(ms):>10.1f} {max(ms):>8.1f} "
                if done
                else f"{'-':>10} {'-':>8} "
            )
            + f"{len(results) - len(done):>5} "
            + (
                f"{statistics.median(nodes):>10.0f} {max(nodes):>10} "
                f"{max(r[2] for r in done) * 1000:>8.1f} {sum(not r[3] for r in done):>8}"
                if done
                else f"{'-':>10} {'-':>10} {'-':>8} {'-':>8}"
            )
            + f"  {each}"
        )
    comps, _ = wan()
    shapes = []
    for i in range(1000):
        frames = 4 * (i % 40) + 1
        height = 16 * (20 + i % 25)
        _, target = wan(frames=frames, height=height, width=832, steps=50)
        shapes.append(Target(f"shape{i}", target.phases, target.uses, target.layer_uses))
    result = timed(comps, shapes, Device(48 * GiB), budget_s * 10)
    print(
        f"{'wan, 1,000 shapes':24} one solve: "
        + (
            f"{result[0] * 1000:.1f} ms ({result[2] * 1000:.1f} ms CPU), {result[1]} nodes"
            + ("" if result[3] else ", unproven")
            if result
            else "over budget"
        )
    )


def hostile_shapes() -> list[tuple[str, list[Component], list[Target], Device]]:
    """Shapes no pipeline has, each a cost the limits must bound (issue 23): many components in
    one phase, more components than the limit, many uneven layers, many components in shared
    phases."""
    rng = random.Random(23)
    out = []
    for n in (256, 1000, 3000):
        comps = [Component(f"c{i}", rng.randint(1, 100) << 20) for i in range(n)]
        phase = Phase("all", GiB, [c.name for c in comps])
        out.append(
            (f"{n:,} components, one phase", comps, [Target("t", [phase])], Device(64 * GiB))
        )
    comps, uses = [], {}
    for i in range(120):
        sizes = [rng.randint(1, 64) << 20 for _ in range(30)]
        comps.append(Component(f"c{i}", sum(sizes) + (rng.randint(0, 64) << 20), sizes))
        uses[f"c{i}"] = tuple(rng.randint(1, 100) for _ in range(30))
    phases = [Phase(f"p{i}", rng.randint(0, 8) * GiB, [f"c{i}"]) for i in range(120)]
    target = Target("t", phases, layer_uses=uses)
    out.append(("120 x 30 uneven layers", comps, [target], Device(48 * GiB)))
    comps, uses = [], {}
    for i in range(20):
        sizes = [rng.randint(50, 400) << 20 for _ in range(100)]
        comps.append(Component(f"c{i}", sum(sizes) + rng.randint(0, GiB), sizes))
        uses[f"c{i}"] = tuple(rng.randint(1, 100) for _ in range(100))
    shared = [
        Phase(f"p{i}", rng.randint(0, 20) * GiB, [f"c{i}", f"c{(i + 1) % 20}", f"c{(i + 7) % 20}"])
        for i in range(20)
    ]
    out.append(
        (
            "20 x 100 in shared phases",
            comps,
            [Target("t", shared, layer_uses=uses)],
            Device(80 * GiB),
        )
    )
    return out


def hostile(budget_s: float) -> None:
    """Each hostile shape solved (proven the least, or the best found at a search limit:
    ``unproven``) or refused (typed ``PlanLimitError``) within the budget."""
    import tracemalloc

    from calibration.plan import PlanLimitError

    print(f"\nhostile shapes (budget {budget_s:g} s each; solved or refused)")
    print(f"{'shape':28} {'outcome':10} {'ms':>8} {'cpu ms':>8} {'peak MiB':>9}  detail")
    for label, comps, targets, device in hostile_shapes():
        start, cpu = time.perf_counter(), time.process_time()
        try:
            plan = solve(comps, targets, device)
            outcome = "infeasible" if not plan.feasible else "solved" if plan.proven else "unproven"
            detail = f"{plan.nodes:,} nodes"
            if plan.feasible and not plan.proven:
                least = plan.lower_bound_bytes or 0
                above = (plan.transfer_bytes - least) / max(1, least)
                detail += f", {plan.stopped_by}, at most {above:.2%} above the least"
        except PlanLimitError as exc:
            outcome, detail = "refused", str(exc)[:80]
        elapsed, used = time.perf_counter() - start, time.process_time() - cpu
        tracemalloc.start()  # a second run for the peak: tracing slows the first one's clock
        try:
            solve(comps, targets, device)
        except PlanLimitError:
            pass
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        over = " OVER BUDGET" if elapsed > budget_s else ""
        print(
            f"{label:28} {outcome:10} {elapsed * 1000:>8.0f} {used * 1000:>8.0f} {peak:>9.1f}  "
            f"{detail}{over}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budget-s", type=float, default=10.0)
    parser.add_argument("--hostile-only", action="store_true", help="only the hostile shapes")
    args = parser.parse_args()
    if args.hostile_only:
        hostile(2.0)
        return
    print(f"machine: {platform.machine()}, CPython {platform.python_version()}; bandwidth 25 GB/s")
    compare()
    solve_times(args.budget_s)
    hostile(2.0)


if __name__ == "__main__":
    main()
