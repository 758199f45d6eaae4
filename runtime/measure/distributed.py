"""Ranks agree: every rank runs the most cautious probe, and records carry the group's worst peaks.

Shrinking is agreed as the MAX of lighten steps over the group (the lighten sequence is the same on
every rank, so a step count names one shape). A record is reduced across a replica group: peaks with
MAX, baselines with MIN (so every derived above-baseline figure is at least every rank's own) and
durations with MAX (the slowest rank sets the pace). Records must have the same structure on every
rank; a mismatch is detected with a fingerprint and raised, rather than silently mixing phases.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
from collections.abc import Iterator
from typing import Protocol, TypeVar

import attrs
import torch
import torch.distributed as dist

from runtime.errors import RecordMismatchError
from runtime.record import WarmupRecord


class Agreement(Protocol):
    """How ranks agree on an integer (lighten steps, attempt status)."""

    def max_int(self, value: int) -> int:
        """The maximum of ``value`` over the group."""


class LocalAgreement:
    """A single process agrees with itself."""

    def max_int(self, value: int) -> int:
        return value


LOCAL = LocalAgreement()

_N = TypeVar("_N", int, float)


def _device(group: dist.ProcessGroup | None) -> torch.device:
    """Collectives on NCCL need CUDA tensors; gloo and others take CPU tensors."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _all_reduce(
    values: list[_N], dtype: torch.dtype, op: object, group: dist.ProcessGroup | None
) -> list[_N]:
    """The values reduced elementwise over the group (`op`: a ``dist.ReduceOp``; `dtype` holds
    them exactly, so ints come back as ints and floats as floats)."""
    tensor = torch.tensor(values, dtype=dtype, device=_device(group))
    dist.all_reduce(tensor, op=op, group=group)
    return tensor.tolist()


class TorchDistributedAgreement:
    """Agreement over a ``torch.distributed`` process group (None: the default group)."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group

    def max_int(self, value: int) -> int:
        return int(_all_reduce([int(value)], torch.int64, dist.ReduceOp.MAX, self.group)[0])


def agreement(group: dist.ProcessGroup | None = None) -> Agreement:
    """The group's agreement when torch.distributed is initialised, else the local one."""
    if dist.is_available() and dist.is_initialized():
        return TorchDistributedAgreement(group)
    return LOCAL


def agree_lighten_steps(steps: int, group: dist.ProcessGroup | None = None) -> int:
    """The most cautious shrink over the group: the MAX of every rank's lighten steps."""
    return agreement(group).max_int(steps)


def _fingerprint(record: WarmupRecord) -> int:
    """A 62-bit digest of the record's structure (phase keys, iterations): equal iff aligned."""
    keys = [
        record.pipeline,
        *(f"{p.kind}/{p.name}/{p.stage}" for p in record.phases),
        *(f"{i.stage}#{i.index}" for i in record.iterations),
    ]
    digest = hashlib.blake2b("\n".join(keys).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2


def reduce_record(record: WarmupRecord, group: dist.ProcessGroup | None = None) -> WarmupRecord:
    """The record with peaks MAX-, baselines MIN- and durations MAX-reduced over the group."""
    if not (dist.is_available() and dist.is_initialized()):
        return record
    fp, n = _fingerprint(record), len(record.phases) + len(record.iterations)
    lo_hi = _all_reduce([fp, -fp, n, -n], torch.int64, dist.ReduceOp.MAX, group)
    if lo_hi[0] != -lo_hi[1] or lo_hi[2] != -lo_hi[3]:
        raise RecordMismatchError(
            "warmup records differ in structure across ranks (phases or iterations); cannot reduce"
        )
    peaks = [record.peak_allocated, record.peak_reserved, -record.baseline_allocated]
    for p in record.phases:
        peaks += [p.peak_allocated, p.peak_reserved, -p.allocated_before]
    for it in record.iterations:
        peaks += [it.peak_allocated, it.peak_reserved]
    peaks = _all_reduce(peaks, torch.int64, dist.ReduceOp.MAX, group)
    durations = [
        record.duration_s,
        *(p.duration_s for p in record.phases),
        *(i.duration_s for i in record.iterations),
    ]
    durations = _all_reduce(durations, torch.float64, dist.ReduceOp.MAX, group)

    top = iter(peaks)
    times = iter(durations)
    peak_allocated, peak_reserved, baseline = next(top), next(top), -next(top)
    duration = next(times)
    phases = tuple(
        attrs.evolve(
            p,
            peak_allocated=next(top),
            peak_reserved=next(top),
            allocated_before=-next(top),
            duration_s=next(times),
            activations_bytes=None,  # this rank's: beside another rank's peak it says nothing
            weight_levels=None,
        )
        for p in record.phases
    )
    iterations = tuple(
        attrs.evolve(i, peak_allocated=next(top), peak_reserved=next(top), duration_s=next(times))
        for i in record.iterations
    )
    return attrs.evolve(
        record,
        peak_allocated=peak_allocated,
        peak_reserved=peak_reserved,
        baseline_allocated=baseline,
        duration_s=duration,
        phases=phases,
        iterations=iterations,
    )


@contextlib.contextmanager
def gloo_rank(rank: int, world: int, port: int, timeout_s: int) -> Iterator[None]:
    """This process as ``rank`` of ``world`` over TCP on ``port`` of this host (gloo, one
    thread), torn down after: the spawned ranks of the tests and of the lifecycle fuzzer."""
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    try:
        yield
    finally:
        dist.destroy_process_group()
