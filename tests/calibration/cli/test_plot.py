"""The plot's axes: from 0, round ticks in one binary unit (never 566.41 KiB, 585.94 KiB)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from calibration.cli.plot import bytes_unit, round_ticks


@given(st.floats(1, 2**40))
def test_byte_ticks_are_round_in_the_axis_unit(top: float) -> None:
    name, scale = bytes_unit(top)
    assert 1 <= top / scale < 1024 or name == "GiB"
    step = round_ticks(top, scale) / scale
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5, 10)), step
    assert 2 <= (top / scale) / step <= 10  # a handful of ticks, never one or fifty


def test_the_issues_axis_gets_round_kib_ticks() -> None:
    top = 585.94 * 1024
    name, scale = bytes_unit(top)
    assert (name, round_ticks(top, scale) / scale) == ("KiB", 200)
