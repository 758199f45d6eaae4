"""Ranks agree on what decides a placement: each rank plans against its own device, from phase
bounds that are the most cautious over the ranks of the same kind of device.

Built on ``runtime.measure.distributed``'s agreement (gloo or NCCL; a single process agrees with
itself): each rank's phase bounds and its device's kind are exchanged as text (``gather_text``) and
every phase takes the largest bound measured for the same work (target and label) by a rank of the
same kind (``cautious_bounds``, the rule in ``agreed_bounds``): the same device type and model and
the same capacity (``device_kind``). A rank of another kind keeps its own measurements: a larger
device's activations (another kernel, another workspace) are not the smaller one's. Then every
rank sends its
inputs (``exchange``: components, targets, device) and every rank calls the planner's
``solve_ranks`` on the same list (``plan_ranks``): one placement that fits every rank on its own
device, else each rank its own; a component only some ranks have is planned, never refused. A
validation's failure is agreed by its severity (any rank's failure fails all, so every rank rolls
back and re-plans together).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from calibration.errors import CalibrationError
from calibration.lifecycle import exchange
from calibration.lifecycle.bounded import Bounded
from calibration.lifecycle.model import Failure
from calibration.plan.model import Component, Device, Plan, Target
from calibration.plan.ranks import RankInputs, solve_ranks
from calibration.plan.solver import solve
from runtime.measure.distributed import Agreement, TorchDistributedAgreement


class RankMismatchError(CalibrationError):
    """A rank sent bounds or planning inputs that cannot be read (ranks out of step)."""


def _torch(agreement: Agreement) -> TorchDistributedAgreement | None:
    """The torch.distributed agreement in ``agreement`` (None: one process, or another kind)."""
    if isinstance(agreement, Bounded):
        return agreement.torch
    return agreement if isinstance(agreement, TorchDistributedAgreement) else None


def rank_of(agreement: Agreement) -> int:
    """This process's place in ``gather_text``'s order (0 alone)."""
    inner = _torch(agreement)
    if inner is None:
        return 0
    import torch.distributed as dist

    return dist.get_rank(inner.group)


def plan_ranks(
    agreement: Agreement, components: Sequence[Component], targets: Sequence[Target], device: Device
) -> tuple[Plan, str]:
    """This rank's plan from every rank's inputs (``solve_ranks``), and what the ranks agreed
    (one rank alone: ``solve``'s plan, and "")."""
    texts = gather_text(agreement, exchange.dumps(components, targets, device))
    if len(texts) == 1:
        return solve(components, targets, device), ""
    try:
        ranks = [RankInputs(*exchange.loads(t)) for t in texts]
    except (TypeError, ValueError, KeyError) as exc:
        raise RankMismatchError(f"a rank sent planning inputs that cannot be read: {exc}") from None
    agreed = solve_ranks(ranks)
    return agreed.plans[rank_of(agreement)], f"{agreed.agreement.value}: {agreed.reason}"


def gather_text(agreement: Agreement, text: str) -> list[str]:
    """Every rank's ``text`` in rank order (one process, or an agreement that only takes the MAX
    of an integer: its own). One MAX of the length, then one all-gather of the bytes."""
    data = text.encode("ascii")
    size = agreement.max_int(len(data))
    inner = _torch(agreement)
    if inner is None:
        return [text]
    import torch
    import torch.distributed as dist

    group = inner.group
    nccl = dist.get_backend(group) == "nccl"
    where = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
    mine = torch.zeros(size, dtype=torch.uint8, device=where)
    mine[: len(data)] = torch.tensor(list(data), dtype=torch.uint8)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    work = dist.all_gather(every, mine, group=group, async_op=True)
    if isinstance(agreement, Bounded):
        agreement.wait(work, "the exchange of planning inputs")
    else:
        work.wait()
    return [bytes(t.cpu().tolist()).rstrip(b"\0").decode("ascii") for t in every]


#: One rank's phase bounds as exchanged: target -> phase label -> bytes.
Bounds = dict[str, dict[str, int]]


def device_kind(where: str, device: Device) -> str:
    """What makes two ranks' measurements the same work's: the torch device type, the device's
    model (CUDA: its name) and the capacity planned for (``Device.capacity_bytes``, exact)."""
    kind = where.split(":", 1)[0]
    model = kind
    if kind == "cuda":
        import torch

        model = torch.cuda.get_device_name(torch.device(where))
    return f"{kind}/{model}/{device.capacity_bytes}"


def _bounds(targets: Sequence[Target]) -> Bounds:
    return {t.name: {p.label: p.bound_bytes for p in t.phases} for t in targets}


def read_bounds(text: str) -> tuple[str, Bounds]:
    """A rank's device kind and bounds, checked: target -> label -> non-negative int."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    kind = value.get("kind") if isinstance(value, dict) else None
    bounds = value.get("bounds") if isinstance(value, dict) else None
    ok = (
        isinstance(kind, str)
        and isinstance(bounds, dict)
        and all(
            isinstance(phases, dict)
            and all(
                isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in phases.values()
            )
            for phases in bounds.values()
        )
    )
    if not ok:
        raise RankMismatchError("a rank sent phase bounds that cannot be read")
    return kind, bounds  # type: ignore[return-value]  # checked above


def agreed_bounds(
    kind: str, targets: Sequence[Target], ranks: Sequence[tuple[str, Bounds]]
) -> tuple[Target, ...]:
    """``targets`` with every phase's bound the largest over the ranks of device ``kind`` that
    have that phase (the same target and label); a rank of another kind is not consulted, and a
    phase only this rank has keeps its own bound. Pure: the rule ``cautious_bounds`` applies."""
    same = [bounds for other, bounds in ranks if other == kind]

    def bound(target: str, label: str, mine: int) -> int:
        return max([mine, *(b.get(target, {}).get(label, 0) for b in same)])

    return tuple(
        attrs.evolve(
            t,
            phases=tuple(
                attrs.evolve(p, bound_bytes=bound(t.name, p.label, p.bound_bytes)) for p in t.phases
            ),
        )
        for t in targets
    )


def cautious_bounds(
    agreement: Agreement, targets: Sequence[Target], kind: str
) -> tuple[Target, ...]:
    """``targets`` with every phase's bound the largest any rank of the same device ``kind``
    (``device_kind``) measured for it (``agreed_bounds``); every rank calls it."""
    text = json.dumps({"kind": kind, "bounds": _bounds(targets)}, sort_keys=True)
    ranks = [read_bounds(t) for t in gather_text(agreement, text)]
    return agreed_bounds(kind, targets, ranks)


def worst_failure(agreement: Agreement, failure: Failure) -> Failure:
    """The most cautious validation outcome over the ranks."""
    return Failure.of_severity(agreement.max_int(failure.severity))
