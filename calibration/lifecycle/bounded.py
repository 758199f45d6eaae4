"""Every collective wait of the lifecycle bounded: a rank that fails, hangs or leaves never holds
the others past a timeout the worker sets.

``Bounded`` wraps a ranks' ``Agreement``: each collective (its ``max_int``, and ``agree``'s text
exchange through ``wait``) runs asynchronously and is waited for at most ``timeout_s``; a wait that
runs out, or a collective that fails (a rank lost), is a ``RankTimeoutError`` or a ``RankError``,
which the lifecycle turns into its mode's answer (strict: stop serving; apply: fall back, alone).
The default timeout is a multiple of the slowest request measured (``default_timeout``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Protocol

from attrs import frozen

from calibration.errors import CalibrationError
from runtime.measure.distributed import Agreement, TorchDistributedAgreement

#: How many of the slowest measured request a rank waits for another before it gives up: a rank
#: may wait while another runs a validation request, its confirmation and a plan.
TIMEOUT_REQUESTS = 20
#: The least a rank waits (seconds): planning and a process's scheduling are not requests.
MIN_TIMEOUT_S = 60.0


class RankError(CalibrationError):
    """A collective failed: another rank is gone or out of step."""


class RankTimeoutError(RankError):
    """Another rank did not reach a collective within the worker's timeout."""


class Work(Protocol):
    """What a collective started with ``async_op=True`` gives: a wait with a timeout."""

    def wait(self, timeout: datetime.timedelta = ...) -> bool: ...


def default_timeout(durations: Iterable[float]) -> float:
    """``TIMEOUT_REQUESTS`` times the slowest request measured, at least ``MIN_TIMEOUT_S``."""
    return max(MIN_TIMEOUT_S, TIMEOUT_REQUESTS * max(durations, default=0.0))


@frozen
class Bounded:
    """``inner``'s collectives, each waited for at most ``timeout_s`` seconds."""

    inner: Agreement
    timeout_s: float

    @property
    def torch(self) -> TorchDistributedAgreement | None:
        """The torch.distributed agreement inside (None: one process, or another kind)."""
        return self.inner if isinstance(self.inner, TorchDistributedAgreement) else None

    def wait(self, work: Work, what: str) -> None:
        """``work`` done within the timeout, else a ``RankTimeoutError`` naming ``what``."""
        try:
            done = work.wait(datetime.timedelta(seconds=self.timeout_s))
        except RuntimeError as exc:
            raise self._error(what, exc) from None
        if done is False:
            raise RankTimeoutError(self._late(what))

    def max_int(self, value: int) -> int:
        """The MAX over the ranks, waited for at most the timeout."""
        agreement = self.torch
        if agreement is None:
            try:
                return self.inner.max_int(value)
            except RankError:
                raise
            except Exception as exc:  # noqa: BLE001 - a collective that fails: a rank lost
                raise self._error("a MAX", exc) from None
        import torch
        import torch.distributed as dist

        group = agreement.group
        where = "cpu"
        if dist.get_backend(group) == "nccl":
            where = f"cuda:{torch.cuda.current_device()}"
        tensor = torch.tensor([int(value)], dtype=torch.int64, device=where)
        self.wait(dist.all_reduce(tensor, dist.ReduceOp.MAX, group, async_op=True), "a MAX")
        return int(tensor.item())

    def _late(self, what: str) -> str:
        return (
            f"another rank did not reach {what} within {self.timeout_s:.3g} s (the rank "
            "timeout); it failed, hangs or left"
        )

    def _error(self, what: str, exc: BaseException) -> RankError:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "timed out" in text.lower() or "timeout" in text.lower():
            return RankTimeoutError(f"{self._late(what)}: {text}")
        return RankError(f"{what} over the ranks failed: {type(exc).__name__}: {text}")


def bounded(agreement: Agreement, timeout_s: float) -> Bounded:
    """``agreement`` with every wait bounded (a ``Bounded`` one re-bounded)."""
    inner = agreement.inner if isinstance(agreement, Bounded) else agreement
    return Bounded(inner, timeout_s)


class RanksStopped(CalibrationError):
    """Another rank stopped (its rollback failed, or it was interrupted): every rank stops serving,
    the most cautious outcome."""


#: What a rank tells the others after a failed validation, most cautious last.
GOING_ON, INTERRUPTED, STUCK = 0, 1, 2


def stop_together(agreement: Agreement, mine: int) -> None:
    """Every rank learns whether any rank must stop (``INTERRUPTED``, ``STUCK``); the others stop
    with it (``RanksStopped``). Called by every rank at the same point."""
    worst = agreement.max_int(mine)
    if worst > mine:
        what = "rollback failed" if worst == STUCK else "request was interrupted"
        raise RanksStopped(f"another rank's {what}: every rank stops serving")
