"""Overhead of recording a warmup request, side by side with the plain forward.

    .venv/bin/python bench/record.py [--rounds 15] [--threads 1]

Measures, each as the median of interleaved rounds (variants alternate, so load drift on a shared
machine hits them alike): a plain forward; the CPU live-tensor tracker alone; the full recorder
(request, stage, iteration, component hooks, layer-use tracker); torch's MemTracker for comparison;
and the CUDA allocator backend when a GPU is present. Prints a markdown table and the machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration.examples.wan import build_tiny_wan, tiny_wan_call
from runtime import load_formulas
from runtime.measure import WarmupRecorder
from runtime.measure.backends import LiveTensorBackend
from runtime.measure.diffusers_hooks import diffusers_recorder, run_pipeline

ARTIFACT = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "runtime"
    / "measure"
    / "data"
    / "wan_tiny.json"
)
PARAMS = {"steps": 2, "frames": 5, "height": 32, "width": 32}


class MLP(nn.Module):
    """A layerwise MLP: ``depth`` blocks in a ModuleList, so the layer tracker has layers to
    count.
    """

    def __init__(self, width: int = 512, depth: int = 8) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            [nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(depth)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def machine() -> str:
    """One line describing where the numbers came from."""
    cpu = platform.processor() or "unknown cpu"
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            cpu = next(
                line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} "
        "thread(s), "
        f"Python {platform.python_version()}, load average {load}"
    )


def interleaved(
    variants: dict[str, Callable[[], object]], rounds: int, reps: int
) -> dict[str, float]:
    """Median seconds per call of each variant, variants alternating within every round."""
    for fn in variants.values():
        for _ in range(3):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            start = time.perf_counter()
            for _ in range(reps):
                fn()
            samples[name].append((time.perf_counter() - start) / reps)
    return {name: statistics.median(values) for name, values in samples.items()}


def recorded_forward(recorder: WarmupRecorder, model: torch.nn.Module, x: torch.Tensor) -> None:
    """One forward as a one-iteration denoising request (the MLP rows, CPU and CUDA alike)."""
    with (
        torch.no_grad(),
        recorder.request(**PARAMS) as req,
        req.stage("DenoisingStage", components=("transformer",)),
        req.iteration(),
    ):
        model(x)
    recorder._records.clear()  # keep the recorder's list from growing over thousands of calls


def mlp_variants(wan) -> dict[str, Callable[[], object]]:
    """Plain forward, tracker alone, full recorder, MemTracker — on a no-grad MLP step."""
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(64, 512)
    tracker = LiveTensorBackend()
    tracker.track_existing(model.parameters())
    recorder = WarmupRecorder(
        wan, device="cpu", components={"transformer": model}, layerwise=("transformer",)
    )

    def plain() -> None:
        with torch.no_grad():
            model(x)

    def tracked() -> None:
        with torch.no_grad(), tracker.tracking():
            model(x)

    def recorded() -> None:
        recorded_forward(recorder, model, x)

    variants = {
        "plain forward": plain,
        "CPU tracker": tracked,
        "recorder + layer tracker": recorded,
    }
    try:
        from torch.distributed._tools.mem_tracker import MemTracker

        mem_tracker = MemTracker()
        mem_tracker.track_external(model, x)

        def with_mem_tracker() -> None:
            mem_tracker.reset_mod_stats()  # MemTracker refuses a root module called twice otherwise
            with torch.no_grad(), mem_tracker:
                model(x)

        variants["torch MemTracker"] = with_mem_tracker
    except ImportError:
        pass
    return variants


def wan_variants(wan) -> dict[str, Callable[[], object]]:
    """Plain tiny Wan run, tracker alone, full diffusers recorder."""
    pipe = build_tiny_wan()
    tracker = LiveTensorBackend()
    recorder = diffusers_recorder(wan, pipe, device="cpu")

    def plain() -> None:
        pipe(**tiny_wan_call(**PARAMS))

    def tracked() -> None:
        with tracker.tracking():
            pipe(**tiny_wan_call(**PARAMS))

    def recorded() -> None:
        with recorder.request(**PARAMS) as req:
            run_pipeline(pipe, req, **tiny_wan_call(**PARAMS))
        recorder._records.clear()

    return {"plain forward": plain, "CPU tracker": tracked, "recorder + layer tracker": recorded}


def mem_tracker_on_wan(wan) -> str:
    """Whether torch's MemTracker can follow a pipeline that calls its transformer more than
    once.
    """
    from torch.distributed._tools.mem_tracker import MemTracker

    pipe = build_tiny_wan()
    try:
        with MemTracker():
            pipe(**tiny_wan_call(**PARAMS))
    except Exception as exc:  # noqa: BLE001 - the refusal is the finding
        return f"{type(exc).__name__}: {str(exc).split('.')[0]}"
    return "ran"


def activation_peaks() -> tuple[int, int]:
    """Activation peak of one no-grad MLP forward by the CPU tracker and by MemTracker (bytes)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(64, 512)
    tracker = LiveTensorBackend()
    with torch.no_grad(), tracker.tracking():
        model(x)
    mem_tracker = MemTracker()
    mem_tracker.track_external(model, x)
    with torch.no_grad(), mem_tracker:
        model(x)
    peak = mem_tracker.get_tracker_snapshot("peak")[torch.device("cpu")]
    act = next(v for k, v in peak.items() if getattr(k, "value", None) == "Activation")
    return tracker.peak_allocated(), act


def cuda_rows(wan, rounds: int) -> list[tuple[str, str, float, float]]:
    """Allocator backend overhead on a GPU MLP (goal: <= 2 % of a forward)."""
    torch.manual_seed(0)
    model = MLP(width=4096, depth=16).cuda().eval().half()
    x = torch.randn(256, 4096, device="cuda", dtype=torch.half)
    recorder = WarmupRecorder(
        wan, device="cuda", components={"transformer": model}, layerwise=("transformer",)
    )

    def plain() -> None:
        with torch.no_grad():
            model(x)
        torch.cuda.synchronize()

    def recorded() -> None:
        recorded_forward(recorder, model, x)

    times = interleaved({"plain forward": plain, "recorder (CUDA allocator)": recorded}, rounds, 5)
    base = times["plain forward"]
    return [("GPU MLP 16x4096 fp16", name, t, t / base) for name, t in times.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--threads", type=int, default=1, help="intra-op threads (1 keeps a shared machine steady)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    wan = load_formulas(ARTIFACT)["wan2_1_t2v_14b"]

    rows: list[tuple[str, str, float, float]] = []
    for workload, variants, reps in (
        ("MLP 8x512, batch 64", mlp_variants(wan), 20),
        ("tiny WanPipeline, 2 steps, 5x32x32", wan_variants(wan), 1),
    ):
        times = interleaved(variants, args.rounds, reps)
        base = times["plain forward"]
        rows += [(workload, name, t, t / base) for name, t in times.items()]
    if torch.cuda.is_available():
        rows += cuda_rows(wan, args.rounds)
        gpu = torch.cuda.get_device_name()
    else:
        gpu = "no GPU"

    print(f"machine: {machine()}; {gpu}")
    print(
        f"command: .venv/bin/python bench/record.py --rounds {args.rounds} --threads "
        f"{args.threads}\n"
    )
    print("| workload | variant | median per call | ratio to plain |")
    print("| --- | --- | ---: | ---: |")
    for workload, name, seconds, ratio in rows:
        print(f"| {workload} | {name} | {seconds * 1e3:.3f} ms | {ratio:.2f}x |")
    ours, theirs = activation_peaks()
    print(
        f"\nactivation peak of one MLP forward: CPU tracker {ours} B, torch MemTracker {theirs} B"
    )
    print(f"torch MemTracker on the tiny WanPipeline: {mem_tracker_on_wan(wan)}")
    if not torch.cuda.is_available():
        print("CUDA allocator backend: no GPU")


if __name__ == "__main__":
    main()
