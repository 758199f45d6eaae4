"""The placement-mechanism registry (calibration.placement): each mechanism installs on a real torch
module, is seen there, computes what the module computed and comes off without a trace; the
libraries' private names live in one module."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch import nn

from calibration.placement.mechanisms import MECHANISMS, Where, has_offload_hooks
from calibration.placement.private import ACCELERATE_HOOK, DIFFUSERS_REGISTRY, PIPELINE_HOOKS

ROOT = Path(__file__).resolve().parents[2]


class Tiny(nn.Module):
    """Two repeated blocks and a head: what group offloading cuts at block level."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.head(x)


def test_the_registry_names_the_four_mechanisms():
    assert set(MECHANISMS) == {"model", "group", "layerwise", "grouped"}
    assert all(mechanism.name == name for name, mechanism in MECHANISMS.items())


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_a_mechanism_installs_is_seen_and_comes_off(name):
    module = Tiny()
    x = torch.ones(3, 4)
    expected = module(x)
    cpu = torch.device("cpu")
    mechanism = MECHANISMS[name]
    assert not mechanism.installed(module) and not has_offload_hooks(module)
    hook = mechanism.install(module, Where(cpu, cpu, blocks=(module.blocks[1],)))
    # accelerate's hook sends a module home; grouped's sends its top group home
    assert (hook is not None) == (name in {"model", "grouped"})
    assert mechanism.installed(module) and has_offload_hooks(module)
    assert torch.equal(module(x), expected)
    mechanism.remove(module)
    assert not mechanism.installed(module) and not has_offload_hooks(module)
    for sub in module.modules():
        assert not hasattr(sub, DIFFUSERS_REGISTRY) and not hasattr(sub, ACCELERATE_HOOK)
    assert torch.equal(module(x), expected)


def test_the_libraries_private_names_are_in_one_module():
    private = ROOT / "calibration" / "placement" / "private.py"
    spelled = "|".join(map(re.escape, (DIFFUSERS_REGISTRY, ACCELERATE_HOOK, PIPELINE_HOOKS)))
    names = re.compile(rf"(?<!\w)({spelled})(?!\w)")  # ``remove_all_hooks`` is public
    found = sorted(
        str(path.relative_to(ROOT))
        for package in ("calibration", "runtime")
        for path in (ROOT / package).rglob("*.py")
        if path != private and names.search(path.read_text())
    )
    assert found == []
    assert names.search(private.read_text())
