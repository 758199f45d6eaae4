"""Memory backends: the CPU live-tensor tracker against peaks computed by hand; CUDA on a GPU
only.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from runtime.levels import MAX_WEIGHT_LEVELS
from runtime.measure.backends import (
    AllocatorBackend,
    LiveStorageCounter,
    LiveTensorBackend,
    MemoryBackend,
    backend_for,
)
from runtime.measure.delegating import DelegatingBackend
from runtime.measure.windows import PeakWindows

F32 = 4
B, I, H, O = 8, 16, 32, 4  # batch, in, hidden, out


class HandMLP(nn.Module):
    """An MLP whose forward keeps exactly known tensors alive: the test computes its peak by
    hand.
    """

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(I, H)
        self.fc2 = nn.Linear(H, O)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)  # new: B*H floats (addmm; the weight transpose is a view)
        h.relu_()  # in place: nothing new
        flat = h.view(-1)  # a view: nothing new
        flat.mul_(2)  # in place through the view: nothing new
        y = self.fc2(h)  # new: B*O floats, while x and h are alive
        return y  # h and flat die here


def weight_bytes(m: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in m.parameters())


def test_mlp_peak_is_exact():
    torch.manual_seed(0)
    mlp = HandMLP().eval()
    backend = LiveTensorBackend()
    backend.track_existing(mlp.parameters())
    weights = (H * I + H + O * H + O) * F32
    assert backend.current_allocated() == weights == weight_bytes(mlp)
    with torch.no_grad(), backend.tracking():
        backend.reset_peak()
        x = torch.randn(B, I)
        y = mlp(x)
        assert backend.peak_allocated() == weights + (B * I + B * H + B * O) * F32
        assert backend.current_allocated() == weights + (B * I + B * O) * F32  # h freed on return
        del x
        assert backend.current_allocated() == weights + B * O * F32
    assert y.shape == (B, O)
    assert backend.peak_reserved() == backend.peak_allocated()  # no caching pool on the CPU


def test_views_and_inplace_count_once_and_free_with_the_last_view():
    backend = LiveTensorBackend()
    outside = torch.ones(100)  # created before tracking: never counted, even when written in place
    with torch.no_grad(), backend.tracking():
        a = torch.empty(1000)
        assert backend.current_allocated() == 1000 * F32
        views = [
            a.view(10, 100),
            a[10:],
            a.t(),
            a.detach(),
            a.unsqueeze(0),
            a.as_strided((10,), (2,)),
        ]
        a.add_(1)
        torch.add(a, 1, out=a)
        outside.mul_(2)
        assert backend.current_allocated() == 1000 * F32
        del a
        assert backend.current_allocated() == 1000 * F32  # the views keep it alive
        views.clear()
        assert backend.current_allocated() == 0
        assert backend.peak_allocated() == 1000 * F32


def test_tensor_freed_mid_phase_and_multi_output_ops():
    backend = LiveTensorBackend()
    with backend.tracking():
        keep = torch.zeros(10)
        backend.reset_peak()
        temp = torch.zeros(500)
        del temp
        small = torch.zeros(20)
        values, indices = torch.zeros(4, 8).max(
            dim=1
        )  # two new storages (float, int64); the input dies
        assert backend.current_allocated() == (10 + 20 + 4) * F32 + 4 * 8
        assert backend.peak_allocated() == (10 + 500) * F32
    del keep, small, values, indices
    assert backend.current_allocated() == 0  # freed after tracking ended still counts down


def test_out_resize_is_followed():
    backend = LiveTensorBackend()
    with backend.tracking():
        out = torch.empty(0)
        torch.add(torch.ones(100), 1, out=out)  # resizes `out` from 0 to 100 floats
        del out
        assert backend.current_allocated() == 0
        assert backend.peak_allocated() == 200 * F32  # the ones(100) input and the resized output


def test_nested_windows_keep_the_outer_peak():
    backend = LiveTensorBackend()
    windows = PeakWindows(backend)
    with backend.tracking():
        outer = windows.open()
        big = torch.zeros(1000)
        del big
        inner = windows.open()  # resets the device peak: the outer window must not lose the 1000
        small = torch.zeros(10)
        windows.close(inner)
        windows.close(outer)
        assert (inner.peak_allocated, outer.peak_allocated) == (10 * F32, 1000 * F32)
        del small


def test_the_activations_own_peak_is_kept_apart_from_where_the_weights_peak():
    # 100 B of weights pinned; 80 + 40 B of activations (their own peak, 120 B, at 220 B live);
    # 80 B freed; a 200 B group onloaded (300 B of weights) and 16 B more: the peak, 356 B, holds
    # 300 B of weights and 56 B of activations, and the activations' own peak stays 120 B. A window
    # opened after it sees only its own: 56 B.
    backend = LiveTensorBackend()
    counter, windows = backend.counter, PeakWindows(backend)
    counter.shift(100, 100)
    outer = windows.open()
    first, second = torch.UntypedStorage(80), torch.UntypedStorage(40)
    counter.add(first)
    counter.add(second)
    del first  # its weakref's callback forgets its 80 B
    counter.shift(200, 200)
    inner = windows.open()
    third = torch.UntypedStorage(16)
    counter.add(third)
    assert (counter.peak, counter.peak_weights, counter.peak_activations) == (356, 300, 56)
    windows.close(inner)
    windows.close(outer)
    assert (outer.peak_allocated, outer.peak_weights, outer.peak_activations) == (356, 300, 120)
    assert (inner.peak_allocated, inner.peak_weights, inner.peak_activations) == (356, 300, 56)
    del second, third


def test_the_activations_peak_is_kept_per_weights_level():
    # A 1000 B group on with 100 B of activations: the peak, 1100 B. The group off, a 200 B one on
    # and 250 B more: 550 B live, the activations' own peak 350 B under the smaller group. Their
    # peak plus the largest weights (1350 B) is over the peak; per level it is exact: (0 B, 100 B)
    # between the groups, (200 B, 350 B), (1000 B, 100 B).
    backend = LiveTensorBackend()
    counter, windows = backend.counter, PeakWindows(backend)
    window = windows.open()
    counter.shift(1000, 1000)
    first = torch.UntypedStorage(100)
    counter.add(first)
    counter.shift(-1000, -1000)
    counter.shift(200, 200)
    second = torch.UntypedStorage(250)
    counter.add(second)
    assert (counter.peak, counter.peak_weights, counter.peak_activations) == (1100, 1000, 350)
    assert counter.peak_levels() == ((0, 100), (200, 350), (1000, 100))
    windows.close(window)
    assert window.peak_levels == ((0, 100), (200, 350), (1000, 100))
    assert max(w + a for w, a in window.peak_levels) == window.peak_allocated
    del first, second


def test_a_level_first_opened_by_an_offload_holds_the_activations_not_the_weights_leaving():
    # A window opened with a 1000 B component on the device, 100 B of activations made, the
    # component offloaded (model offload between two components): the level it leaves for (no
    # weights) holds the same 100 B of activations. Opened before the move was counted, it read
    # 1100 B there: the offloaded weights taken for activations at a level never seen before.
    backend = LiveTensorBackend()
    counter, windows = backend.counter, PeakWindows(backend)
    counter.shift(1000, 1000)
    window = windows.open()
    activations = torch.UntypedStorage(100)
    counter.add(activations)
    counter.shift(-1000, -1000)
    windows.close(window)
    assert window.peak_levels == ((0, 100), (1000, 100))
    assert window.peak_activations == 100
    del activations


def test_the_weights_levels_are_bounded_and_never_under():
    # 5 * MAX levels (the counter merges past 4 * MAX as it goes), each more weights and fewer
    # activations: all on the frontier, merged upward to MAX, each level under a kept one.
    counter = LiveStorageCounter()
    held = []
    for i in range(5 * MAX_WEIGHT_LEVELS):
        counter.shift(10, 10)
        storage = torch.UntypedStorage(1000 - 5 * i)
        counter.add(storage)
        held.append((counter.weights, counter.current - counter.weights))
        del storage
    levels = counter.peak_levels()
    assert len(levels) == MAX_WEIGHT_LEVELS
    for w, a in held:
        assert any(kw >= w and ka >= a for kw, ka in levels), (w, a)


def test_backend_for():
    assert isinstance(backend_for("cpu"), LiveTensorBackend)
    auto = backend_for("auto")
    assert auto.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    free, total = backend_for("cpu").memory_info()
    assert 0 < free <= total


class _FakeDeviceModule:
    """Stands in for ``torch.cuda``: checks that the allocator backend only forwards calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def __getattr__(self, name: str):
        values = {
            "memory_allocated": 10,
            "max_memory_allocated": 30,
            "max_memory_reserved": 64,
            "mem_get_info": (5, 80),
            "current_device": 1,
        }

        def call(*args):
            self.calls.append((name, args))
            return values.get(name)

        return call


def test_allocator_backend_forwards_to_the_device_module():
    fake = _FakeDeviceModule()
    backend = AllocatorBackend(torch.device("cuda"), fake)
    assert backend.device == torch.device("cuda", 1) and backend.name == "cuda-allocator"
    assert (backend.current_allocated(), backend.peak_allocated(), backend.peak_reserved()) == (
        10,
        30,
        64,
    )
    backend.reset_peak()
    backend.release_pool()
    assert backend.memory_info() == (5, 80)
    assert ("reset_peak_memory_stats", (torch.device("cuda", 1),)) in fake.calls
    assert ("empty_cache", ()) in fake.calls


def test_a_delegating_backend_reads_as_its_inner_one():
    # A capacity: its free memory is the counter's, not the host's MemAvailable, which other
    # processes move between two reads (uncapped, the two reads below differed under load).
    capacity = 1 << 20
    inner = LiveTensorBackend(capacity=capacity)
    backend = DelegatingBackend(inner)
    assert isinstance(backend, MemoryBackend)
    assert (backend.name, backend.device) == (inner.name, inner.device)
    weights = torch.zeros(64)
    with backend.tracking():
        backend.track_existing([weights])
        backend.reset_peak()
        held = torch.ones(256)
        del held
        reads = (backend.current_allocated(), backend.peak_allocated(), backend.peak_reserved())
        assert reads == (inner.current_allocated(), inner.peak_allocated(), inner.peak_reserved())
        assert reads[:2] == (64 * F32, (64 + 256) * F32)
        backend.synchronize()
        backend.release_pool()
        assert backend.memory_info() == inner.memory_info() == (capacity - 64 * F32, capacity)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_backend_against_a_known_allocation():
    backend = backend_for("cuda")
    windows = PeakWindows(backend)
    torch.cuda.synchronize()
    base = backend.current_allocated()
    outer = windows.open()
    big = torch.empty(
        64 << 20, dtype=torch.uint8, device="cuda"
    )  # 64 MiB: a multiple of the 512 B rounding
    del big
    inner = windows.open()
    small = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    windows.close(inner)
    windows.close(outer)
    assert outer.peak_allocated - base == 64 << 20
    assert inner.peak_allocated - base == 1 << 20
    assert outer.peak_reserved >= outer.peak_allocated
    del small
    backend.release_pool()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_recorder_against_a_known_allocation(wan):
    from runtime.measure import WarmupRecorder

    recorder = WarmupRecorder(wan, device="cuda")
    with recorder.request(steps=1) as req, req.stage("DenoisingStage"), req.iteration():
        x = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
        del x
    record = recorder.records[-1]
    assert record.backend == "cuda-allocator" and record.device.startswith("cuda:")
    assert record.iterations[0].peak_allocated - record.baseline_allocated == 32 << 20
    assert record.peak_above_baseline == 32 << 20


def test_the_per_op_decisions_outlive_one_tracking():
    """Each request pushes a new counting mode; the ops' plans (read from their schemas) are the
    backend's, made once, not once per request."""
    backend = LiveTensorBackend()
    with backend.tracking():
        torch.ones(2).add(1)
    plans = dict(backend.plans)
    with backend.tracking():
        torch.ones(2).add(1)
    assert torch.ops.aten.add.Tensor in {plan.func for plan in plans.values()}
    assert backend.plans == plans and all(backend.plans[k] is p for k, p in plans.items())
