"""`WorkMeter`, the clock `dslc infer`'s `time ~` lines are chosen from: each op's FLOPs by
torch's own formulas plus ``BYTES_WEIGHT`` x its bytes, views free, the same count every run."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional
from torch.utils.flop_counter import FlopCounterMode

from calibration.infer.time_terms import BYTES_WEIGHT
from calibration.infer.work import WorkMeter, _attention_flops

F32 = 4  # bytes


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(1, 9))
def test_a_matmul_counts_its_flops_and_the_bytes_it_reads_and_writes(m, k, n):
    a, b = torch.ones(m, k), torch.ones(k, n)
    with WorkMeter() as meter:
        torch.mm(a, b)
    assert meter.total == 2 * m * k * n + BYTES_WEIGHT * F32 * (m * k + k * n + m * n)
    assert meter.clock() == float(meter.total)


def test_views_move_nothing_and_an_elementwise_op_moves_its_bytes():
    x = torch.ones(4, 6)
    with WorkMeter() as meter:
        x.view(6, 4).transpose(0, 1)[1:3].unsqueeze(0)
    assert meter.total == 0
    with WorkMeter() as meter:
        torch.add(x, x)
    assert meter.total == BYTES_WEIGHT * F32 * 3 * x.numel()


@settings(max_examples=20, deadline=None)
@given(
    batch=st.integers(1, 2),
    heads=st.integers(1, 3),
    queries=st.integers(1, 12),
    keys=st.integers(1, 12),
    dim=st.sampled_from([4, 8]),
)
def test_a_fused_attention_counts_the_two_matmuls_it_fuses(batch, heads, queries, keys, dim):
    """The oracle: torch's own formulas for ``q @ k^T`` and ``p @ v`` done apart."""
    q = torch.randn(batch, heads, queries, dim)
    k, v = torch.randn(batch, heads, keys, dim), torch.randn(batch, heads, keys, dim)
    with FlopCounterMode(display=False) as apart:
        torch.matmul(torch.matmul(q, k.transpose(-1, -2)).softmax(-1), v)
    assert _attention_flops((q, k, v)) == apart.get_total_flops()
    with WorkMeter() as meter:
        out = functional.scaled_dot_product_attention(q, k, v)
    moved = F32 * (q.numel() + k.numel() + v.numel() + out.numel())
    assert meter.total >= apart.get_total_flops() + BYTES_WEIGHT * moved


def test_a_module_s_work_is_the_same_in_every_run_and_grows_with_its_input():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.SiLU())

    def work(size: int) -> int:
        with torch.no_grad(), WorkMeter() as meter:
            net(torch.randn(1, 3, size, size))
        return meter.total

    assert work(8) == work(8) > 0
    a, b, c = work(8), work(16), work(24)  # the weights' bytes + a multiple of the pixels
    assert 3 * (c - b) == 5 * (b - a) and b - a > 0  # (576 - 256) : (256 - 64) pixels
