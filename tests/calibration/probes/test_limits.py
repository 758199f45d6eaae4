"""Probe planning's cost is bounded for any sizes (issue 23): the corners of the warmup-probe box
are generated lazily and refused past ``MAX_PROBE_GROUP`` differing params, before one is built;
the time-probe ladder weighs at most ``MAX_LADDER_POINTS`` combinations and is not built when no
time probe is needed. Tests bound calls and memory, not the clock."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import pytest

from artifact.limits import MAX_LADDER_POINTS, MAX_PROBE_GROUP
from calibration.errors import CalibrationError, CalibrationLimitError
from calibration.probes.policy import mixes
from calibration.probes.sizes import extra_probes, ladder
from runtime import Pipeline
from tests.budget import count_calls

N = 25
MiB = 1 << 20


def wide_source(n: int) -> str:
    """``n`` int params in legal probe groups of 5, every one in the stage's memory and time."""
    params = "\n".join(f"    param p{i}: int = 64 in [1, 4096]" for i in range(n))
    groups = "\n".join(
        "    probe " + ", ".join(f"p{i}" for i in range(k, min(k + 5, n))) for k in range(0, n, 5)
    )
    terms = " + ".join(f"p{i}" for i in range(n))
    return (
        f"pipeline wide {{\n{params}\n{groups}\n"
        f"    stage DenoisingStage {{\n        memory ~ {terms}\n"
        f"        time ~ {terms}\n    }}\n}}\n"
    )


@pytest.fixture(scope="module")
def wide() -> Pipeline:
    from dslc.build import load_text

    return load_text(wide_source(N), "wide.wf")["wide"]


def point(value: int, moved: int = N, rest: int = 64) -> dict[str, int | bool]:
    return {f"p{i}": value if i < moved else rest for i in range(N)}


def traced(work):  # a test helper: the result (or the error) and the peak MiB
    tracemalloc.start()
    try:
        try:
            result: object = work()
        except CalibrationError as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1] / MiB
    finally:
        tracemalloc.stop()


def test_a_warmup_differing_in_25_params_is_refused_before_a_corner_is_built(wide):
    """2**25 corners took 1.6 GiB and a MemoryError; now a typed error naming the limit."""
    warmup, probe, target = point(32), point(64), point(128)
    (result, peak), calls = count_calls(
        lambda: traced(lambda: extra_probes(wide, warmup, probe, target))
    )
    assert isinstance(result, CalibrationLimitError)
    assert "MAX_PROBE_GROUP" in str(result) and "differ in 25 params" in str(result)
    assert "--warmup" in str(result)
    assert peak < 2 and calls < 20_000


def test_corners_are_generated_lazily_and_bounded():
    a = {f"p{i}": 1 for i in range(MAX_PROBE_GROUP)}
    b = {f"p{i}": 2 for i in range(MAX_PROBE_GROUP)}
    corners = mixes(a, b)
    assert isinstance(corners, Iterator)
    first = next(corners)
    assert first == {**a, "p0": 2}
    assert len([first, *corners]) == 2**MAX_PROBE_GROUP - 2
    with pytest.raises(CalibrationLimitError, match="MAX_PROBE_GROUP"):
        mixes({**a, "extra": 1}, {**b, "extra": 2})


def test_a_warmup_differing_in_the_most_params_allowed_gets_a_result(wide):
    warmup, probe, target = (point(v, moved=MAX_PROBE_GROUP) for v in (32, 64, 128))
    (result, peak), calls = count_calls(
        lambda: traced(lambda: extra_probes(wide, warmup, probe, target))
    )
    assert isinstance(result, list)
    assert all(wide.is_admissible(**p) for p in result)
    assert peak < 64 and calls < 5_000_000


def test_the_ladder_over_12_differing_params_weighs_a_bounded_number_of_points(wide):
    """4**12 combinations (16.8 M) were built before 512 were kept: a MemoryError."""
    probe, target = point(64, moved=12), point(4096, moved=12)
    checked = 0
    admissible = wide.is_admissible

    def counting(**params: int | bool) -> bool:
        nonlocal checked
        checked += 1
        return admissible(**params)

    wide.is_admissible = counting  # type: ignore[method-assign]
    try:
        points, peak = traced(lambda: ladder(wide, probe, target))
    finally:
        del wide.is_admissible
    assert isinstance(points, list) and 0 < len(points) <= 512
    assert checked <= MAX_LADDER_POINTS
    assert peak < 64
    moved = [sum(p[k] != probe[k] for k in probe) for p in points]
    assert min(moved) == 1  # the fewest moved params come first


def test_no_ladder_is_built_when_no_stage_needs_a_time_probe():
    from calibration.probes.time_probe import time_probe, uncertain_stages
    from dslc.build import load_text
    from runtime.estimate import estimate
    from tests.calibration.probes.test_time_probe import TARGET, steady
    from tests.runtime.estimate.conftest import TOY

    toy = load_text(TOY, "toy.wf")["toy"]
    runs = steady(90, 0.18)
    result = estimate(runs, toy, target=TARGET)
    assert uncertain_stages(result) == ()

    def never() -> Iterator[dict[str, int | bool]]:
        raise AssertionError("the ladder was built")
        yield {}

    assert time_probe(toy, runs, result, TARGET, never(), repeat=3) is None
