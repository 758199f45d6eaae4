"""Group offloading counted group by group on a capped CPU device: diffusers' own hooks on a small
real module tell the live-tensor backend each onload and offload (``calibration.placement.groups``),
so the peak holds the weights outside the blocks and the largest block, never the whole module;
a block that cannot fit beside those weights stops with the component, its size and the cap."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from calibration.placement.groups import count_groups
from calibration.placement.mechanisms import GROUP, Where
from runtime.measure.backends import LiveTensorBackend
from runtime.measure.residency import WeightsOverCapacity

F32 = 4
WIDTH = 16
SMALL, LARGE = 32, 64  # the two blocks' hidden widths


def _block(hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(WIDTH, hidden), nn.Tanh(), nn.Linear(hidden, WIDTH))


class Net(nn.Module):
    """Two blocks in a ModuleList (a group each) and top-level layers (the unmatched group)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Linear(WIDTH, WIDTH)
        self.blocks = nn.ModuleList([_block(SMALL), _block(LARGE)])
        self.out = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def _bytes(module: nn.Module) -> int:
    return sum(p.numel() * F32 for p in module.parameters())


def _placed(capacity: int) -> tuple[Net, LiveTensorBackend]:
    net = Net()
    GROUP.install(net, Where(torch.device("cpu"), torch.device("cpu")))
    backend = LiveTensorBackend(capacity=capacity)
    backend.groups = count_groups({"net": net}, backend)
    backend.watch_weights({"net": net})
    return net, backend


def _run(net: Net, backend: LiveTensorBackend) -> None:
    with torch.no_grad(), backend.tracking():
        net(torch.ones(1, WIDTH))


def test_the_groups_are_diffusers_own():
    net, backend = _placed(1 << 20)
    labels = {g.label: g.nbytes for g in backend.groups}
    top = _bytes(net.embed) + _bytes(net.out)
    assert labels == {
        "blocks.0": _bytes(net.blocks[0]),
        "blocks.1": _bytes(net.blocks[1]),
        "weights outside its blocks": top,
    }


def test_peak_weights_are_the_unmatched_group_and_the_largest_block_not_the_whole():
    net, backend = _placed(1 << 20)
    assert backend.current_allocated() == 0  # nothing on the device before the forward
    _run(net, backend)
    top, large = _bytes(net.embed) + _bytes(net.out), _bytes(net.blocks[1])
    assert backend.counter.peak_weights == top + large
    assert backend.counter.peak_weights < _bytes(net)
    assert backend.counter.weights == 0  # every group offloaded after the forward


def test_a_block_that_cannot_fit_beside_the_unmatched_group_is_named():
    net = Net()
    top, large = _bytes(net.embed) + _bytes(net.out), _bytes(net.blocks[1])
    net, backend = _placed(top + large - 1)
    with pytest.raises(WeightsOverCapacity) as raised:
        _run(net, backend)
    assert (raised.value.component, raised.value.part) == ("net", "blocks.1")
    assert raised.value.nbytes == large and raised.value.held == top
    assert raised.value.whole == _bytes(net)


class Nested(nn.Module):
    """A model whose blocks lie one level down (CogVideoX's VAE: an encoder and a decoder holding
    the ModuleLists) and that names no ``_group_offload_block_modules``."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Net()
        self.out = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.inner(x))


def test_blocks_one_level_down_are_found_when_the_model_names_none():
    # diffusers groups the top-level ModuleLists and the block modules a model names; a model with
    # neither was one group, onloaded whole (the tiny CogVideoX's VAE: 4,052,108 B at once)
    from calibration.placement.pipeline import offload_groups

    nested = Nested()
    offload_groups("cpu", {"nested": nested})
    backend = LiveTensorBackend(capacity=1 << 20)
    backend.groups = count_groups({"nested": nested}, backend)
    backend.watch_weights({"nested": nested})
    with torch.no_grad(), backend.tracking():
        nested(torch.ones(1, WIDTH))
    inner = nested.inner
    outside = _bytes(nested.out) + _bytes(inner.embed) + _bytes(inner.out)
    assert backend.counter.peak_weights == outside + _bytes(inner.blocks[1]) < _bytes(nested)
    assert {g.label for g in backend.groups} >= {"inner.blocks.0", "inner.blocks.1"}
    assert backend.counter.weights == 0


def _two_layer_clip() -> nn.Module:
    """A real CLIP text encoder with projection (SD3's two): its layers two levels down, in
    ``text_model.encoder.layers``."""
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    torch.manual_seed(0)
    return CLIPTextModelWithProjection(
        CLIPTextConfig(
            vocab_size=11,
            hidden_size=16,
            intermediate_size=37,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=8,
            projection_dim=16,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=0,
        )
    )


def test_blocks_two_levels_down_are_found_when_the_model_names_none():
    # CLIP's layers sit in text_model.encoder.layers: naming text_model alone made diffusers
    # recurse into it and find no list there, so text_model was one group, onloaded whole (the
    # real SD3's CLIP-G: 1.3 GB at once under a cap meant for one of its 32 layers)
    from calibration.placement.pipeline import offload_groups

    clip = _two_layer_clip()
    layers = clip.text_model.encoder.layers
    offload_groups("cpu", {"clip": clip})
    backend = LiveTensorBackend(capacity=1 << 20)
    backend.groups = count_groups({"clip": clip}, backend)
    backend.watch_weights({"clip": clip})
    with torch.no_grad(), backend.tracking():
        clip(input_ids=torch.tensor([[3, 4, 5, 1]]))
    assert {g.label for g in backend.groups} >= {
        "text_model.encoder.layers.0",
        "text_model.encoder.layers.1",
    }
    whole = sum(t.numel() * t.element_size() for t in (*clip.parameters(), *clip.buffers()))
    one_layer = sum(t.numel() * F32 for t in layers[1].parameters())
    assert backend.counter.peak_weights == whole - one_layer
    assert backend.counter.weights == 0
