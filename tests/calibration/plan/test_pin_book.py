"""The pin state drives ``apply`` (issue 39, items 5 and 8): one ``PinBook`` across placements,
each ``apply`` placing its owner's pins per part (a frontier of layers pins those layers' tensors
only), each ``undo`` leaving (released unless another owner holds the copy). On the CPU the
bookkeeping runs and a clone stands for ``pin_memory()`` (which needs CUDA) to follow the tensors;
on a CUDA device the same with real pins (bench/gpu.sh runs those)."""

from __future__ import annotations

import attrs
import pytest

from calibration.core.weights import pipeline_bytes
from calibration.examples import EXAMPLES
from calibration.plan import Component, Device, Phase, Target, solve
from calibration.plan.apply import apply
from calibration.plan.pinning import PinBook
from calibration.plan.pinstate import PinKey, plan_pins

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

FLUX = EXAMPLES["flux"]
STAGE = {"text_encoder": "text", "text_encoder_2": "text", "transformer": "denoise", "vae": "vae"}
SINGLE = "single_transformer_blocks.0"  # the transformer's layer 1


def _plan(pipe, frontier: tuple[int, ...] = (1,)):
    """At 300,000 B the transformer streams both layers, every host copy pageable (no budget),
    except ``frontier``: the transformer's layers pinned (the pin budget's frontier)."""
    weights, layers = pipeline_bytes(pipe, ("transformer",))
    components = [
        Component(n, w, tuple(layers.get(n, {}).values()), tuple(layers.get(n, {})))
        for n, w in weights.items()
    ]
    phases = [
        Phase(s, 0, [n for n in weights if STAGE[n] == s]) for s in sorted(set(STAGE.values()))
    ]
    target = Target("t", phases, layer_uses={"transformer": (1, 1)})
    plan = solve(components, [target], Device(300_000, reserve_bytes=0, pin_budget_bytes=0))
    assert plan.placement("transformer").resident_layers == () and plan.pinned_bytes == 0
    placements = tuple(
        attrs.evolve(p, pinned_layers=frontier) if p.component == "transformer" else p
        for p in plan.placements
    )
    return attrs.evolve(plan, placements=placements)


def _pinned(module):
    return {id(t) for t in [*module.parameters(), *module.buffers()] if t.is_pinned()}


@pytest.fixture
def stand_in(monkeypatch):
    """On the CPU: pinning allowed, a clone for ``pin_memory()`` (held copies are then tracked
    by identity, not by ``is_pinned()``)."""
    from calibration.plan import apply as applying

    if torch.cuda.is_available():
        return "cuda"
    monkeypatch.setattr(applying, "pinnable", lambda onload, offload: True)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: self.clone())
    return "cpu"


def _held_tensors(applied) -> set[int]:
    """The tensors now holding one of this placement's host copies."""
    return {
        id(t)
        for copies in applied.pins.values()
        for t, host in copies.tensors
        if t.data.data_ptr() == host.data_ptr()
    }


def _ids(module) -> set[int]:
    return {id(t) for t in [*module.parameters(), *module.buffers()]}


def test_a_frontier_pins_its_layers_tensors_only(stand_in):
    pipe = FLUX.build(0)
    book = PinBook()
    plan = _plan(pipe)
    applied = apply(plan, pipe, device=stand_in, offload_device="cpu", pins=book, owner="w")
    (change,) = book.changes
    assert change.pin == {PinKey("transformer", 1)} == plan_pins(plan)
    single = pipe.transformer.get_submodule(SINGLE)
    assert _held_tensors(applied) == _ids(single)  # layer 1's tensors, nothing else
    applied.undo()
    assert book.changes[-1].release == {PinKey("transformer", 1)} and not book.state.pinned
    assert not _held_tensors(applied) and not applied.pins


def test_a_replan_moves_the_pins_and_another_owners_copy_stays(stand_in):
    pipe = FLUX.build(0)
    book = PinBook()
    shared = PinKey("transformer", 0)
    narrow, wide = _plan(pipe, (1,)), _plan(pipe, (0, 1))
    other = apply(narrow, pipe, device=stand_in, offload_device="cpu", pins=book, owner="i2i")
    other_change = book.changes[-1]
    other.undo()  # the other pipeline's hooks off; its pins re-placed without a placement
    book.place("i2i", {shared}, lambda k: [], can_pin=False)
    mine = apply(wide, pipe, device=stand_in, offload_device="cpu", pins=book, owner="worker")
    placed = book.changes[-1]
    assert other_change.pin == {PinKey("transformer", 1)}
    assert placed.shared == {shared} and placed.pin == {PinKey("transformer", 1)}
    mine.undo()
    left = book.changes[-1]
    assert left.kept == {shared} and left.release == {PinKey("transformer", 1)}
    assert book.state.pinned == {shared} and book.state.of("i2i") == {shared}


def test_a_plan_that_pins_nothing_places_nothing_and_undo_leaves_nothing(stand_in):
    pipe = FLUX.build(0)
    book = PinBook()
    applied = apply(_plan(pipe, ()), pipe, device=stand_in, offload_device="cpu", pins=book)
    assert book.changes[-1].pin == frozenset() and applied.pinned_bytes == 0
    applied.undo()
    assert book.changes[-1].release == frozenset() and len(book.changes) == 2


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="pinning applies on CUDA only")


@cuda
def test_on_cuda_only_the_frontier_layer_is_pinned_and_undo_unpins_it():
    pipe = FLUX.build(0)
    book = PinBook()
    applied = apply(_plan(pipe), pipe, device="cuda", offload_device="cpu", pins=book)
    single = pipe.transformer.get_submodule(SINGLE)
    assert _pinned(pipe.transformer) == _ids(single) and not _pinned(pipe.vae)
    expected = sum(p.numel() * p.element_size() for p in single.parameters())
    assert applied.pinned_bytes == expected
    applied.undo()
    assert not _pinned(pipe.transformer) and applied.pinned_bytes == 0


@cuda
def test_on_cuda_a_copy_another_owner_holds_stays_pinned_after_undo():
    pipe = FLUX.build(0)
    book = PinBook()
    first = apply(_plan(pipe), pipe, device="cuda", offload_device="cpu", pins=book, owner="a")
    key = PinKey("transformer", 1)
    book.place("b", {key}, lambda k: [], can_pin=True)  # shared: already pinned, nothing made
    first.undo()
    assert key in book.copies.copies and book.changes[-1].kept == {key}
    book.leave("b")
    assert key not in book.copies.copies and not book.state.pinned


def test_a_rollback_keeping_pins_lets_the_next_apply_keep_and_release_only_the_dropped(stand_in):
    """A rollback between placements (``undo(keep_pins=True)``): the re-plan that keeps layer 1
    pinned and drops layer 0 releases layer 0 once and neither releases nor re-pins layer 1 (the
    same host copies, held by the same tensors); the final undo releases the rest."""
    pipe = FLUX.build(0)
    book = PinBook()
    one, zero = PinKey("transformer", 1), PinKey("transformer", 0)
    first = apply(_plan(pipe, (0, 1)), pipe, device=stand_in, offload_device="cpu", pins=book)
    copies = book.copies.copies.get(one)
    first.undo(keep_pins=True)
    assert len(book.changes) == 1 and book.state.of("apply") == {zero, one}
    second = apply(_plan(pipe, (1,)), pipe, device=stand_in, offload_device="cpu", pins=book)
    moved = book.changes[-1]
    assert (moved.pin, moved.release) == (frozenset(), {zero})  # no churn of layer 1
    assert book.copies.copies.get(one) is copies and book.state.of("apply") == {one}
    assert copies is not None  # the same copy, held again by layer 1's tensors
    assert _held_tensors(second) == _ids(pipe.transformer.get_submodule(SINGLE))
    second.undo()
    assert book.changes[-1].release == {one} and not book.state.pinned and not book.copies.copies
