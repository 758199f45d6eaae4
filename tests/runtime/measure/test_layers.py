"""Layer uses: per-layer call counts of repeated groups, per stage, with every hook removed
afterwards.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from runtime.measure.layers import (
    HookSet,
    LayerUseTracker,
    count_hooks,
    hook_components,
    repeated_layers,
)
from runtime.record import LayerUse


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.ModuleList(
            [nn.Linear(4, 4), nn.Linear(4, 4)]
        )  # nested: not a layer group of its own

    def forward(self, x):
        for m in self.inner:
            x = m(x)
        return x


class Net(nn.Module):
    """Two repeated groups; ``forward`` can skip layers to check per-layer counts."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.heads = nn.ModuleList([nn.Linear(4, 4)])

    def forward(self, x, skip_last: bool = False):
        for block in self.blocks[: 2 if skip_last else 3]:
            x = block(x)
        return self.heads[0](x)

    def decode(self, x):
        return x * 2


def test_repeated_layers_outermost_and_named():
    net = Net()
    assert [n for n, _ in repeated_layers(net)] == ["blocks.0", "blocks.1", "blocks.2", "heads.0"]
    assert [n for n, _ in repeated_layers(net, ["blocks.0.inner"])] == [
        "blocks.0.inner.0",
        "blocks.0.inner.1",
    ]
    with pytest.raises(ValueError, match="no nn.ModuleList named"):
        repeated_layers(net, ["nope"])


def test_counts_per_stage_and_no_hooks_remain():
    net = Net()
    stage = {"now": "A"}
    tracker = LayerUseTracker(lambda: stage["now"])
    hooks = HookSet()
    tracker.attach(hooks, {"net": net}, {"net": ["blocks"]})
    x = torch.zeros(1, 4)
    net(x)
    net(x, skip_last=True)
    stage["now"] = "B"
    net(x)
    stage["now"] = None
    net(x, skip_last=True)
    hooks.remove()
    assert count_hooks(net) == 0
    net(x)  # not counted any more
    assert tracker.uses(["B", "A"]) == (
        LayerUse("net", "blocks.0", "B", 1),
        LayerUse("net", "blocks.0", "A", 2),
        LayerUse("net", "blocks.0", None, 1),
        LayerUse("net", "blocks.1", "B", 1),
        LayerUse("net", "blocks.1", "A", 2),
        LayerUse("net", "blocks.1", None, 1),
        LayerUse("net", "blocks.2", "B", 1),
        LayerUse("net", "blocks.2", "A", 1),
    )
    assert tracker.totals() == {
        ("net", "blocks.0"): 4,
        ("net", "blocks.1"): 4,
        ("net", "blocks.2"): 2,
    }


class _Listener:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def component_entered(self, name: str, method: str = "forward") -> None:
        self.events.append(("in", name if method == "forward" else f"{name}.{method}"))

    def component_exited(self, name: str) -> None:
        self.events.append(("out", name))


def test_component_hooks_forward_and_method_are_removed():
    net, listener, hooks = Net(), _Listener(), HookSet()
    hook_components(hooks, {"net": net, "dec": net.heads[0]}, listener)
    decoder = Net()
    hook_components(hooks, {"vae": decoder}, listener, {"vae": "decode"})
    net(torch.zeros(1, 4))
    decoder.decode(torch.zeros(1))
    assert listener.events == [
        ("in", "net"),
        ("in", "dec"),
        ("out", "dec"),
        ("out", "net"),
        ("in", "vae.decode"),
        ("out", "vae"),
    ]
    hooks.remove()
    assert count_hooks(net) == 0 and "decode" not in vars(decoder)
    assert decoder.decode(torch.ones(1)).item() == 2.0


def test_several_entry_methods_of_one_component_are_told_apart():
    class Codec(nn.Module):
        def encode(self, x):
            return x + 1

        def decode(self, x):
            return x - 1

    codec, listener, hooks = Codec(), _Listener(), HookSet()
    hook_components(hooks, {"vae": codec}, listener, {"vae": ("encode", "decode")})
    codec.decode(codec.encode(torch.zeros(1)))
    assert listener.events == [
        ("in", "vae.encode"),
        ("out", "vae"),
        ("in", "vae.decode"),
        ("out", "vae"),
    ]
    hooks.remove()
    assert "encode" not in vars(codec) and "decode" not in vars(codec)


def test_exit_is_reported_when_forward_raises():
    class Boom(nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")

    listener, hooks = _Listener(), HookSet()
    boom = Boom()
    hook_components(hooks, {"boom": boom}, listener)
    with pytest.raises(RuntimeError):
        boom(torch.zeros(1))
    assert listener.events == [("in", "boom"), ("out", "boom")]
    hooks.remove()
    assert count_hooks(boom) == 0
