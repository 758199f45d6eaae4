"""One rank's gloo process group, for the spawned workers of the multi-process tests."""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator

import torch
import torch.distributed as dist


@contextlib.contextmanager
def gloo_rank(rank: int, world: int, port: int, timeout_s: int) -> Iterator[None]:
    """This process as ``rank`` of ``world`` over TCP on ``port``, one thread, torn down after."""
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
