"""One rank's gloo process group, for the spawned workers of the multi-process tests
(``runtime.measure.distributed.gloo_rank``, shared with the lifecycle fuzzer)."""

from __future__ import annotations

from runtime.measure.distributed import gloo_rank

__all__ = ["gloo_rank"]
