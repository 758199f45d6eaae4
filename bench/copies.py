"""Host-to-device copy bandwidth from pinned and from pageable host memory, and their ratio: the
planner's ``Device.pageable_factor`` (`dslc plan --pageable-factor`; docs/planning.md).

    .venv/bin/python bench/copies.py [--sizes-mib 64,256,1024] [--rounds 7] [--device cuda:0]

For each size: a pinned host tensor and a pageable one of the same bytes, each copied to the
device ``--rounds`` times (after one copy to warm up), synchronised around every copy; the median
of each. The factor is the pinned rate over the pageable rate at the largest size (the weights a
plan streams are layers of tens or hundreds of MiB). Without CUDA it says it cannot measure and
exits 0: on the CPU there is no host-to-device link, and no pinned memory either. The last line
puts the measured factor beside the planner's default (``DEFAULT_PAGEABLE_FACTOR``), which changes
only from such a measurement.
"""

from __future__ import annotations

import argparse
import statistics
import time


def _rate(src: object, dst: object, rounds: int) -> float:
    """The median bytes per second of ``dst.copy_(src)``, each copy synchronised."""
    import torch

    assert isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor)
    dst.copy_(src)
    torch.cuda.synchronize(dst.device)
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize(dst.device)
        seconds.append(time.perf_counter() - start)
    return src.numel() * src.element_size() / statistics.median(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes-mib", default="64,256,1024")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--device", default="cuda:0")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: cannot measure pinned vs pageable host-to-device copies here")
        return 0
    device = torch.device(args.device)
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    print(f"{'MiB':>6} {'pinned GB/s':>12} {'pageable GB/s':>14} {'factor':>7}")
    factor = 1.0
    for mib in (int(s) for s in args.sizes_mib.split(",")):
        count = mib << 20
        dst = torch.empty(count, dtype=torch.uint8, device=device)
        pinned = torch.ones(count, dtype=torch.uint8).pin_memory()
        pageable = torch.ones(count, dtype=torch.uint8)
        fast, slow = _rate(pinned, dst, args.rounds), _rate(pageable, dst, args.rounds)
        factor = fast / slow
        print(f"{mib:>6} {fast / 1e9:>12.2f} {slow / 1e9:>14.2f} {factor:>7.2f}")
        del dst, pinned, pageable
    from calibration.plan.model import DEFAULT_PAGEABLE_FACTOR

    print(f"pageable factor {factor:.2f} (largest size): dslc plan --pageable-factor {factor:.2f}")
    print(f"measured {factor:.2f} vs the default --pageable-factor {DEFAULT_PAGEABLE_FACTOR:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
