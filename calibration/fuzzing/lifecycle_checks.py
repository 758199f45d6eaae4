"""Where a lifecycle fuzz case's pipeline and ranks ended (``calibration.fuzzing.lifecycle``):
each component's state as a plan may change it, the components not as they were, whether ranks
ended differently, a line a case."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn


def _ours(hooks: Iterable[object]) -> int:
    """How many of ``hooks`` are not transformers' own (which it adds at a first forward, to
    record hidden states, and keeps)."""
    return sum(not getattr(h, "__module__", "").startswith("transformers") for h in hooks)


def _state(module: nn.Module) -> tuple[object, ...]:
    """What a plan may change on ``module``: every submodule's hooks (diffusers' by name: a FLUX
    request leaves an empty registry on its transformer) and forward override, every tensor's
    device and dtype."""
    from calibration.placement.mechanisms import has_offload_hooks
    from calibration.placement.private import accelerate_hook, diffusers_registry

    subs = tuple(
        (
            name,
            type(accelerate_hook(sub)).__name__,
            tuple(sorted(getattr(diffusers_registry(sub), "hooks", None) or ())),
            _ours(sub._forward_hooks.values()),
            _ours(sub._forward_pre_hooks.values()),
            "forward" in sub.__dict__,
        )
        for name, sub in module.named_modules()
    )
    tensors = tuple(
        (name, str(t.device), str(t.dtype))
        for name, t in [*module.named_parameters(), *module.named_buffers()]
    )
    return (has_offload_hooks(module), subs, tensors)


def snapshot(pipe: object) -> dict[str, tuple[object, ...]]:
    """Each component's ``_state``."""
    from runtime.measure.diffusers_hooks import pipeline_modules

    return {name: _state(m) for name, m in pipeline_modules(pipe).items()}  # type: ignore[arg-type]


def changed(before: dict[str, tuple[object, ...]], pipe: object) -> list[str]:
    """The components of ``pipe`` not as they were in ``before``."""
    after = snapshot(pipe)
    return sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))


def not_restored(result: dict[str, object]) -> list[str]:
    """The components not as they were, other than those a failed rollback reports left in
    place; a served plan whose undo kept failing counts as every component it touched."""
    left = set(result.get("left", ()))  # type: ignore[call-overload]
    changed = [n for n in result.get("changed", ()) if n not in left]  # type: ignore[attr-defined]
    return changed + (["(undo failed)"] if result.get("undo") else [])


def differing(ranks: list[dict[str, object]]) -> bool:
    """Whether the ranks ended in different states: status, serving and placement differ among
    the ranks that ended, or an interrupted rank's others serve."""
    ended = [r for r in ranks if "status" in r]
    seen = {(r["status"], r["serving"], json.dumps(r.get("placement"))) for r in ended}
    interrupted = any(r.get("interrupted") for r in ranks)
    return len(seen) > 1 or (interrupted and any(r["serving"] for r in ended))


def summary(ranks: list[dict[str, object]] | None) -> str:
    """One line: each rank's end."""
    if ranks is None:
        return "HANG"
    shown = []
    for r in ranks:
        if "status" in r:
            end = f"status {r['status']}" + (" serving" if r.get("serving") else "")
        elif "exit" in r:
            end = f"exit {r['exit']}"
        else:
            end = "interrupted" if r.get("interrupted") else "raised"
        shown.append(end + (f" changed {not_restored(r)}" if not_restored(r) else ""))
    return "; ".join(shown)
