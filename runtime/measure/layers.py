"""Module hooks for measuring: when components run, and how often each repeated layer runs.

Layerwise offload decides per layer of a repeated group (``blocks.0 … blocks.N``), so the recorder
counts layer uses per stage. Every hook is a ``RemovableHandle`` (or a wrapped instance method)
held by one ``HookSet`` and removed when measuring ends, so the model is left as it was found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from attrs import define, field
from torch import Tensor, nn

from runtime.errors import RuntimeValueError
from runtime.record import LayerUse


class Removable(Protocol):
    """A hook that can be taken off again (torch's ``RemovableHandle``)."""

    def remove(self) -> None:
        """Take the hook off."""


class ComponentListener(Protocol):
    """Told when a component's entry point starts and ends."""

    def component_entered(self, name: str, method: str = "forward") -> None:
        """A component's forward (or entry ``method``) started."""

    def component_exited(self, name: str) -> None:
        """It returned or raised."""


def repeated_layers(
    module: nn.Module, groups: Iterable[str] | None = None
) -> list[tuple[str, nn.Module]]:
    """Children of the outermost ``nn.ModuleList``s of ``module`` (or of the named groups)."""
    lists: list[tuple[str, nn.Module]] = [
        (name, m) for name, m in module.named_modules() if isinstance(m, nn.ModuleList) and name
    ]
    if groups is not None:
        wanted = set(groups)
        missing = wanted - {name for name, _ in lists}
        if missing:
            raise RuntimeValueError(
                f"no nn.ModuleList named {sorted(missing)} in {type(module).__name__}"
            )
        lists = [(name, m) for name, m in lists if name in wanted]
    else:
        outer: list[tuple[str, nn.Module]] = []
        for name, m in lists:
            if not any(name.startswith(f"{o}.") for o, _ in outer):
                outer.append((name, m))
        lists = outer
    return [(f"{name}.{child}", layer) for name, m in lists for child, layer in m.named_children()]


@define
class HookSet:
    """Every hook installed for one measurement, removable in one call."""

    _handles: list[Removable] = field(factory=list)
    _restores: list[Callable[[], None]] = field(factory=list)

    def add(self, handle: Removable) -> None:
        """Keep a ``RemovableHandle``."""
        self._handles.append(handle)

    def wrap_method(
        self, module: nn.Module, method: str, before: Callable[[], None], after: Callable[[], None]
    ) -> None:
        """Shadow ``module.method`` on the instance with a wrapper; removal restores it."""
        had_own = method in vars(module)
        original = getattr(module, method)

        def wrapped(*args: object, **kwargs: object) -> object:
            before()
            try:
                return original(*args, **kwargs)
            finally:
                after()

        object.__setattr__(module, method, wrapped)

        def restore() -> None:
            if had_own:
                object.__setattr__(module, method, original)
            else:
                object.__delattr__(module, method)

        self._restores.append(restore)

    def remove(self) -> None:
        """Remove every hook and wrapper, newest first."""
        while self._handles:
            self._handles.pop().remove()
        while self._restores:
            self._restores.pop()()


def hook_components(
    hooks: HookSet,
    components: Mapping[str, nn.Module],
    listener: ComponentListener,
    entry_points: Mapping[str, str | Sequence[str]] | None = None,
) -> None:
    """Tell ``listener`` when each component runs: forward, or the methods in ``entry_points``
    (one name or several: ``{"vae": ("encode", "decode")}``)."""
    entry_points = entry_points or {}
    for name, module in components.items():
        declared = entry_points.get(name, "forward")
        methods = (declared,) if isinstance(declared, str) else tuple(declared)
        for method in methods:

            def enter(*_: object, _name: str = name, _method: str = method) -> None:
                listener.component_entered(_name, _method)

            def leave(*_: object, _name: str = name) -> None:
                listener.component_exited(_name)

            if method == "forward":
                hooks.add(module.register_forward_pre_hook(enter))
                hooks.add(module.register_forward_hook(leave, always_call=True))
            else:
                hooks.wrap_method(module, method, enter, leave)


@define
class LayerUseTracker:
    """Counts calls of each repeated layer of layerwise components, per stage, via pre-hooks."""

    stage_of: Callable[[], str | None]
    _counts: dict[tuple[str, str, str | None], int] = field(factory=dict)
    _order: dict[tuple[str, str], int] = field(factory=dict)

    def attach(
        self,
        hooks: HookSet,
        components: Mapping[str, nn.Module],
        groups: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        """Hook every repeated layer (of all outermost ModuleLists unless ``groups`` names some)."""
        groups = groups or {}
        for component, module in components.items():
            for layer_name, layer in repeated_layers(module, groups.get(component)):
                self._order.setdefault((component, layer_name), len(self._order))

                def count(*_: object, _key: tuple[str, str] = (component, layer_name)) -> None:
                    full = (*_key, self.stage_of())
                    self._counts[full] = self._counts.get(full, 0) + 1

                hooks.add(layer.register_forward_pre_hook(count))

    def uses(self, stage_order: Iterable[str] = ()) -> tuple[LayerUse, ...]:
        """Counts as records: layers in model order, stages in ``stage_order`` then first use."""
        rank = {s: i for i, s in enumerate(stage_order)}
        seen: dict[str | None, int] = {}
        for _, _, stage in self._counts:
            seen.setdefault(stage, len(seen))

        def key(item: tuple[tuple[str, str, str | None], int]) -> tuple[int, int, int]:
            (component, layer, stage), _ = item
            order = self._order[(component, layer)]
            return (order, rank.get(stage, len(rank)), seen[stage])  # type: ignore[arg-type]

        return tuple(
            LayerUse(component, layer, stage, calls)
            for (component, layer, stage), calls in sorted(self._counts.items(), key=key)
        )

    def totals(self) -> dict[tuple[str, str], int]:
        """Calls per (component, layer) over all stages."""
        out: dict[tuple[str, str], int] = {}
        for (component, layer, _), calls in self._counts.items():
            out[(component, layer)] = out.get((component, layer), 0) + calls
        return out


def count_hooks(module: nn.Module) -> int:
    """Forward hooks and pre-hooks left on ``module`` and its submodules (zero after measuring)."""
    return sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in module.modules())


def iter_tensors(modules: Iterable[nn.Module]) -> Iterator[Tensor]:
    """Parameters and buffers of the modules, to seed the CPU tracker's baseline with weights."""
    for module in modules:
        yield from module.parameters()
        yield from module.buffers()
