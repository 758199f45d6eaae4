"""Undo, for real, on the tiny FLUX (CPU): hooks gone, devices restored, the same images; a failed
apply leaves nothing behind; any sequence of apply / undo / apply gives the untouched images.

The tiny FLUX's modules are built in training mode (dropout draws from torch's global generator),
so each run seeds it, and starts from a fresh scheduler, as ``Session.body`` does.
"""

from __future__ import annotations

import pytest
from diffusers.utils.torch_utils import get_module_execution_device
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibration.core.calls import reset_scheduler
from calibration.examples import EXAMPLES
from calibration.placement.groups import hooked_groups
from calibration.placement.mechanisms import has_offload_hooks
from calibration.plan.apply import PlanApplyError, apply
from calibration.plan.model import Device, Placement, PlacementKind, Plan
from runtime.measure.diffusers_hooks import pipeline_modules
from runtime.measure.layers import repeated_layers

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

FLUX = EXAMPLES["flux"]
SHAPE = {"num_inference_steps": 2, "height": 64, "width": 64}
NAMES = ("vae", "text_encoder", "text_encoder_2", "transformer")


def _run(pipe):
    reset_scheduler(pipe)
    torch.manual_seed(0)
    with torch.no_grad():
        return pipe(**FLUX.call_kwargs(0), **SHAPE).images


@pytest.fixture(scope="module")
def reference():
    """The untouched pipeline's images."""
    return _run(FLUX.build(0))


@pytest.fixture(scope="module")
def pipe():
    """One pipeline shared by the tests: each leaves it undone (what the tests check)."""
    return FLUX.build(0)


def _placement(name: str, kind: PlacementKind, kept: tuple[int, ...] = (), layers: int = 0):
    return Placement(name, kind, kept, layers, 0, 0, 0, 0, 0.0, None, 0)


def _plan(placements) -> Plan:
    return Plan(True, "fits", tuple(placements), (), 0, 0.0, Device(1 << 30))


def _state(pipe):
    """Every tensor's device, and whether any offloading hook or instance ``forward`` is left."""
    modules = pipeline_modules(pipe)
    devices = {
        (n, t): p.device
        for n, m in modules.items()
        for t, p in m.state_dict(keep_vars=True).items()
    }
    hooks = {n for n, m in modules.items() if has_offload_hooks(m)}
    forwards = {n for n, m in modules.items() for s in m.modules() if "forward" in s.__dict__}
    return devices, hooks, forwards


MIXED = _plan(
    [
        _placement("vae", PlacementKind.RESIDENT),
        _placement("text_encoder", PlacementKind.OFFLOADED),
        _placement("text_encoder_2", PlacementKind.OFFLOADED),
        _placement("transformer", PlacementKind.LAYERWISE, (0,), 2),
    ]
)


def test_undo_removes_every_hook_and_gives_the_same_images(pipe, reference):
    before = _state(pipe)
    applied = apply(MIXED, pipe, device="cpu", offload_device="cpu")
    streamed = pipe.transformer.get_submodule(applied.streamed["transformer"][0])
    assert streamed._diffusers_hook.hooks and hasattr(pipe.text_encoder, "_hf_hook")
    for module in pipeline_modules(pipe).values():  # diffusers sends a component's inputs there
        assert get_module_execution_device(module) == torch.device("cpu")
        assert module._hf_hook.execution_device == torch.device("cpu")
    assert torch.equal(_run(pipe), reference)
    applied.undo()
    assert _state(pipe) == before and _state(pipe)[1] == set()
    assert not hasattr(streamed, "_diffusers_hook") and not hasattr(pipe.text_encoder, "_hf_hook")
    assert torch.equal(_run(pipe), reference)
    applied.undo()  # twice is once
    assert _state(pipe) == before


GROUPED = _plan(
    [
        _placement("vae", PlacementKind.GROUPED),
        _placement("text_encoder", PlacementKind.OFFLOADED),
        _placement("text_encoder_2", PlacementKind.RESIDENT),
        _placement("transformer", PlacementKind.GROUPED),
    ]
)


def test_grouped_components_are_group_offloaded_and_undone_to_the_same_images(pipe, reference):
    before = _state(pipe)
    applied = apply(GROUPED, pipe, device="cpu", offload_device="cpu")
    for name in ("vae", "transformer"):  # diffusers' groups over the whole module, as calibrated
        module = getattr(pipe, name)
        assert [n for n, _ in hooked_groups(module) if n] and name in applied.offload_hooks
    assert torch.equal(_run(pipe), reference)
    applied.undo()
    assert _state(pipe) == before and _state(pipe)[1] == set()
    assert not any(hasattr(m, "_diffusers_hook") for m in pipe.vae.modules())
    assert torch.equal(_run(pipe), reference)


def test_a_second_apply_without_undo_is_refused(pipe):
    applied = apply(MIXED, pipe, device="cpu", offload_device="cpu")
    try:
        with pytest.raises(PlanApplyError, match="already carry offloading hooks"):
            apply(MIXED, pipe, device="cpu", offload_device="cpu")
    finally:
        applied.undo()
    assert not _state(pipe)[1]


def test_a_failed_apply_leaves_nothing_half_applied(pipe, reference):
    before = _state(pipe)
    wrong = _plan(  # the text encoders are hooked first, then the transformer's count is wrong
        [
            _placement("text_encoder", PlacementKind.OFFLOADED),
            _placement("vae", PlacementKind.RESIDENT),
            _placement("transformer", PlacementKind.LAYERWISE, (0,), 2),
            _placement("text_encoder_2", PlacementKind.LAYERWISE, (0,), 99),
        ]
    )
    with pytest.raises(PlanApplyError, match="the plan has 99 layers"):
        apply(wrong, pipe, device="cpu", offload_device="cpu")
    assert _state(pipe) == before
    for _, block in repeated_layers(pipe.transformer):
        assert not hasattr(block, "_diffusers_hook")
    assert torch.equal(_run(pipe), reference)


def _random_plan(draw) -> Plan:
    placements = []
    for name in NAMES:
        kinds = [PlacementKind.RESIDENT, PlacementKind.OFFLOADED, PlacementKind.GROUPED]
        if name == "transformer":
            kinds.append(PlacementKind.LAYERWISE)
        kind = draw(st.sampled_from(kinds))
        if kind is PlacementKind.LAYERWISE:
            kept = tuple(sorted(draw(st.sets(st.integers(0, 1), max_size=2))))
            placements.append(_placement(name, kind, kept, 2))
        else:
            placements.append(_placement(name, kind))
    return _plan(draw(st.permutations(placements)))


plans = st.composite(_random_plan)()


@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(plans, min_size=1, max_size=3))
def test_any_apply_undo_sequence_gives_the_untouched_images(pipe, reference, sequence):
    """Apply each random plan (images equal under it), undo it (images equal again), and on."""
    before = _state(pipe)
    for plan in sequence:
        applied = apply(plan, pipe, device="cpu", offload_device="cpu")
        try:
            assert torch.equal(_run(pipe), reference)
        finally:
            applied.undo()
        assert _state(pipe) == before
    assert torch.equal(_run(pipe), reference)
