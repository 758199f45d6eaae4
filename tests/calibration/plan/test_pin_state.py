"""Pin state across placements (the peer's worker scenarios): a component that leaves the host
(resident now) has its pins released; a pin another owner shares stays; a frontier that grows pins
only what is new. The bookkeeping is pure and tested here; ``SharedPins`` applies it to tensors
on a CUDA device (skipped on the CPU, where it makes nothing)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from calibration.placement.pins import SharedPins
from calibration.plan import Component, Device, Phase, Target, solve
from calibration.plan.pinstate import REST, PinKey, PinState, plan_pins

GiB = 1 << 30


def _keys(component: str, *parts: int) -> frozenset[PinKey]:
    return frozenset(PinKey(component, p) for p in parts)


def _dit_plan(capacity: int, pin_budget: int | None = None):
    dit = Component.uniform("transformer", 4 * GiB, 4, GiB)
    target = Target("t", (Phase("denoise", 0, ("transformer",)),))
    return solve([dit], [target], Device(capacity, reserve_bytes=0, pin_budget_bytes=pin_budget))


def test_a_component_that_becomes_resident_has_its_pins_released():
    streamed, resident = _dit_plan(2 * GiB), _dit_plan(4 * GiB)
    assert plan_pins(streamed) == _keys("transformer", 1, 2, 3)  # layer 0 kept on the device
    first = PinState().apply_plan("worker", streamed)
    assert first.pin == _keys("transformer", 1, 2, 3) and first.release == frozenset()
    replanned = first.state.apply_plan("worker", resident)  # the re-plan keeps it all resident
    assert replanned.release == _keys("transformer", 1, 2, 3) and replanned.pin == frozenset()
    assert replanned.state.pinned == frozenset()


def test_a_pin_another_owner_shares_is_kept_until_the_last_owner_leaves():
    encoder = _keys("text_encoder", REST)  # one host copy, two pipelines offloading it
    both = PinState().place("t2i", encoder).state.place("i2i", encoder)
    assert both.shared == encoder and both.pin == frozenset()  # pinned once
    resident = both.state.place("t2i", ())  # t2i now keeps the encoder on the device
    assert resident.kept == encoder and resident.release == frozenset()
    assert resident.state.pinned == encoder and resident.state.of("i2i") == encoder
    last = resident.state.leave("i2i")
    assert last.release == encoder and last.state.pinned == frozenset()


def test_a_frontier_that_grows_pins_only_its_new_layers():
    narrow = _dit_plan(GiB, pin_budget=2 * GiB)  # every layer streamed, 2 of them pinned
    wide = _dit_plan(GiB, pin_budget=3 * GiB)
    assert narrow.placement("transformer").pinned_layers == (0, 1)
    first = PinState().apply_plan("worker", narrow)
    grown = first.state.apply_plan("worker", wide)
    assert grown.pin == _keys("transformer", 2) and grown.release == frozenset()
    shrunk = grown.state.apply_plan("worker", narrow)  # the budget shrank back
    assert shrunk.release == _keys("transformer", 2) and shrunk.pin == frozenset()


KEYS = st.builds(PinKey, st.sampled_from(["a", "b", "c"]), st.integers(-1, 3))
MOVES = st.lists(st.tuples(st.sampled_from(["w0", "w1", "w2"]), st.frozensets(KEYS)), max_size=12)


@given(MOVES)
def test_pinned_is_every_owners_wants_and_each_change_is_exactly_the_difference(moves):
    state, wants = PinState(), {}
    for owner, wanted in moves:
        before = state.pinned
        change = state.place(owner, wanted)
        wants[owner] = wanted
        state = change.state
        union = frozenset().union(*wants.values())
        assert state.pinned == union
        assert change.pin == union - before and change.release == before - union
        assert not change.pin & change.release
        assert change.kept <= union and change.shared <= before
        assert state.of(owner) == wanted


def test_on_the_cpu_shared_pins_make_nothing():
    tensor = torch.zeros(4)
    pins = SharedPins(can_pin=False)
    pins.move(_keys("a", 0), (), lambda key: [tensor])
    assert pins.copies == {} and pins.pinned_bytes == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinning applies on CUDA only")
def test_on_cuda_a_shared_copy_stays_pinned_until_no_owner_holds_it():
    encoder = torch.nn.Linear(64, 64)
    tensors = {PinKey("text_encoder", REST): list(encoder.parameters())}
    pins, state = SharedPins(can_pin=True), PinState()
    for owner in ("t2i", "i2i"):
        change = state.place(owner, tensors)
        pins.move(change.pin, change.release, tensors.__getitem__)
        state = change.state
    assert next(encoder.parameters()).is_pinned()
    change = state.leave("t2i")
    pins.move(change.pin, change.release, tensors.__getitem__)
    assert next(encoder.parameters()).is_pinned()  # i2i still holds it
    change = change.state.leave("i2i")
    pins.move(change.pin, change.release, tensors.__getitem__)
    assert not next(encoder.parameters()).is_pinned() and pins.pinned_bytes == 0
