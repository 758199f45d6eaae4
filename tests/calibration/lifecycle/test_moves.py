"""Move ordering: the device never holds more than before or after while a placement changes.

``move_order`` is checked by a Hypothesis property against a brute force over every order of the
same moves (the least peak any order reaches), and the real ``apply`` on the tiny FLUX is watched
through each component's and streamed block's own ``to`` (the calls the libraries make) to follow
that order.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.examples import EXAMPLES
from calibration.plan.apply import apply
from calibration.plan.model import Device, Placement, PlacementKind, Plan
from calibration.plan.moves import REST, MoveKind, device_totals, move_order
from runtime.measure.layers import repeated_layers

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")


@st.composite
def changes(draw):
    """Components of 1-3 parts, each part on the device now or not, and after or not."""
    sizes, current, target = {}, {}, {}
    for c in range(draw(st.integers(1, 4))):
        name = f"c{c}"
        parts = [REST, *(f"blocks.{i}" for i in range(draw(st.integers(0, 2))))]
        sizes[name] = {p: draw(st.integers(0, 1000)) for p in parts}
        current[name] = {p for p in parts if draw(st.booleans())}
        target[name] = {p for p in parts if draw(st.booleans())}
    return sizes, current, target


def _peak(moves, sizes, current):
    return max(device_totals(moves, sizes, current))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(changes())
def test_releases_come_first_and_the_peak_is_the_least_any_order_reaches(change):
    sizes, current, target = change
    order = move_order(sizes, current, target)
    totals = device_totals(order, sizes, current)
    after = sum(sizes[n][p] for n in sizes for p in target[n])
    assert totals[-1] == after  # the moves take the device exactly to the target's total
    assert max(totals) <= max(totals[0], after)  # never above the larger of before and after
    kinds = [m.kind for m in order]
    assert kinds == sorted(kinds, key=lambda k: k is MoveKind.ACQUIRE)
    brute = min(_peak(p, sizes, current) for p in itertools.permutations(order))
    assert max(totals) == brute
    capacity = max(totals[0], after)
    for cap in (capacity, capacity + 1):
        assert all(t <= cap for t in totals)


def test_acquire_first_would_exceed_what_release_first_keeps():
    """The order matters: resident-first overshoots both ends on this change."""
    sizes = {"a": {REST: 10}, "b": {REST: 10}}
    current, target = {"a": {REST}, "b": set()}, {"a": set(), "b": {REST}}
    order = move_order(sizes, current, target)
    assert [(m.component, m.kind) for m in order] == [
        ("a", MoveKind.RELEASE),
        ("b", MoveKind.ACQUIRE),
    ]
    assert device_totals(order, sizes, current) == [10, 0, 10]
    assert device_totals(order[::-1], sizes, current) == [10, 20, 10]


FLUX = EXAMPLES["flux"]


def _placement(name, kind, kept=(), layers=0):
    return Placement(name, kind, kept, layers, 0, 0, 0, 0, 0.0, None, 0)


def _bytes(module):
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def _watch(monkeypatch, labels):
    """Record the label of each watched module whose ``to`` runs (accelerate's, diffusers' and
    ours all reach ``nn.Module.to``), then move as before."""
    calls: list[str] = []
    real = torch.nn.Module.to

    def to(self, *args, **kwargs):
        if id(self) in labels:
            calls.append(labels[id(self)])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "to", to)
    return calls


def test_apply_makes_its_moves_in_move_orders_order(monkeypatch):
    pipe = FLUX.build(0)
    plan = Plan(
        True,
        "fits",
        (  # resident first in the plan: apply must still release before it acquires
            _placement("vae", PlacementKind.RESIDENT),
            _placement("text_encoder", PlacementKind.OFFLOADED),
            _placement("transformer", PlacementKind.LAYERWISE, (0,), 2),
            _placement("text_encoder_2", PlacementKind.OFFLOADED),
        ),
        (),
        0,
        0.0,
        Device(1 << 30),
    )
    blocks = repeated_layers(pipe.transformer)
    sizes = {  # in the plan's order
        n: {REST: _bytes(getattr(pipe, n))} for n in ("vae", "text_encoder", "transformer")
    }
    layer = {n: _bytes(b) for n, b in blocks}
    sizes["transformer"] = {REST: sizes["transformer"][REST] - sum(layer.values()), **layer}
    sizes["text_encoder_2"] = {REST: _bytes(pipe.text_encoder_2)}
    on_cpu = {n: set(parts) for n, parts in sizes.items()}  # the CPU is the device here
    target = {"vae": on_cpu["vae"], "text_encoder": set(), "text_encoder_2": set()}
    target["transformer"] = {REST, blocks[0][0]}
    expected = move_order(sizes, on_cpu, target)

    labels = {id(getattr(pipe, n)): n for n in sizes}
    calls = _watch(monkeypatch, labels)
    applied = apply(plan, pipe, device="cpu", offload_device="cpu")
    try:
        assert [(m.component, m.kind) for m in applied.moves] == [
            (m.component, m.kind) for m in expected
        ]
        assert [m.kind for m in expected] == [MoveKind.RELEASE] * 3 + [MoveKind.ACQUIRE] * 2
        assert [m.bytes for m in applied.moves if m.kind is MoveKind.RELEASE] == [
            sizes["text_encoder"][REST],
            layer[blocks[1][0]],
            sizes["text_encoder_2"][REST],
        ]
        assert applied.streamed["transformer"] == (blocks[1][0],)
        # what accelerate moved (diffusers moves a block's tensors, not the block): both offloads
        # before the VAE's move onto the device, though the plan lists the VAE first
        assert calls == ["text_encoder", "text_encoder_2", "vae"]
    finally:
        applied.undo()
