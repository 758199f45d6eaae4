"""Time to ready of `dslc serve`'s worker, cold (no state folder: the probes run) and warm (the
state folder a cold start wrote: the stored records replayed, no probe runs), side by side.

    .venv/bin/python bench/serve_ready.py [--examples flux sdxl] [--runs 1]
    .venv/bin/python bench/serve_ready.py --examples sd15-real     # real size, ~5 GB of RAM

Each start is ``serve_boot.boot`` on a freshly built pipeline (CPU, one round): a tiny example at
its demo target, planned for a 64 MiB device, or ``sd15-real``, SD 1.5 at its real size
(``bench/realsize_serve.py``: published configs, random weights, fp32) at 256x256 x 2 steps
(probe 128x128, warmup 64x64), planned for an 8 GiB device. A start is the lifecycle up to a
validated placement, as `dslc serve` runs it before /healthz says ready, the pipeline's build
included (the HTTP server's own start, well under a second, is not in it). Best of ``--runs``
per column; the worker is closed after each start.
"""

from __future__ import annotations

import argparse
import gc
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration.cli.options import Choice
from calibration.cli.serve_boot import Boot, boot
from calibration.core.config import RunConfig
from calibration.core.shapes import Shapes
from calibration.plan.model import Device

DEVICE = Device(64 << 20, reserve_bytes=1 << 20)
#: The real-size cases: the factory module's ``build``, its formulas and their pipeline.
REAL = {
    "sd15-real": (
        "bench/realsize_serve.py:build",
        "tests/calibration/data/custom_sd.wf",
        "custom_sd",
        Device(8 << 30, reserve_bytes=256 << 20),
    )
}


def _boot(example: str, state: Path) -> Boot:
    """The start `dslc serve` makes for ``example`` (a tiny one, or a real-size factory)."""
    config = RunConfig(device="cpu", repeat=1)
    if example in REAL:
        factory, formulas, name, device = REAL[example]
        choice = Choice("flux", str(ROOT / factory), ROOT / formulas, name)
        return Boot(choice, Shapes({}, {}, {}), config, device, state)
    return Boot(
        Choice(example, None, ROOT / "formulas", None), Shapes({}, {}, {}), config, DEVICE, state
    )


def start_s(given: Boot) -> tuple[float, bool]:
    """One start's seconds, and whether it started warm."""
    began = time.perf_counter()
    worker = boot(given)
    seconds = time.perf_counter() - began
    warm = worker.started.warm
    worker.close()
    del worker
    gc.collect()  # a real-size pipeline freed before the next one is built
    return seconds, warm


def row(example: str, runs: int) -> str:
    cold, warm = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            given = _boot(example, Path(folder) / "state")
            seconds, was_warm = start_s(given)
            assert not was_warm
            cold.append(seconds)
            seconds, was_warm = start_s(given)
            assert was_warm, "the second start did not start warm"
            warm.append(seconds)
    c, w = min(cold), min(warm)
    return f"| {example} | {c:.1f} | {w:.1f} | {w / c:.2f}x |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=["flux", "sdxl"])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    python = sys.version.split()[0]
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}; python {python}")
    print("| example | cold s | warm s | warm / cold |")
    print("| --- | ---: | ---: | ---: |")
    for example in args.examples:
        print(row(example, args.runs), flush=True)


if __name__ == "__main__":
    main()
