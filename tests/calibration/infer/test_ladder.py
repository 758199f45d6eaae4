"""`dslc infer`'s ladder: levels per axis from its range, contract and cost, walked lazily.

No pipeline runs in the fast tests (the sizes are planned before anything runs); the slow one runs
the tiny SD 1.5 pipeline with and without a base and counts the work the runs did.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from artifact.limits import MAX_LADDER_POINTS
from calibration.infer.ladder import (
    DEFAULT_SIZES,
    MAX_SIZES,
    Budget,
    cheapest_base,
    cost,
    int_params,
    plan,
    steps_across,
    steps_param,
)
from calibration.infer.measure import load
from calibration.infer.run import counted, flipped

SKELETONS = Path(__file__).resolve().parents[1] / "data" / "skeletons"


def _pipeline(body: str):
    return load("pipeline p {\n" + body + "\n}\n", "p", "<test>")


AUDIO = "    param seconds: int = 10 in [1, 60]\n    call audio_length_in_s = seconds"


@pytest.mark.parametrize("base", [None, {"seconds": 1}, {"seconds": 2}, {"seconds": 4}])
def test_an_audio_axis_gets_held_out_sizes_none_above_the_default(base):
    audio = _pipeline(AUDIO)
    sizes = plan(audio, base or cheapest_base(audio))
    held = [s.point["seconds"] for s in sizes if s.held_out]
    fitted = {s.point["seconds"] for s in sizes if not s.held_out}
    assert held, [s.point for s in sizes]
    assert all(s.point["seconds"] <= 10 for s in sizes), [s.point for s in sizes]
    assert set(held).isdisjoint(fitted) and len(fitted) >= 3  # two fix a slope, a third tests


def test_a_huge_range_with_a_contract_is_walked_not_listed():
    huge = _pipeline(
        "    param x: int = 999999997 in [1, 1000000000] where x % 4 == 1\n"
        "    param steps: int = 50 in [1, 1000]\n"
        "    call num_inference_steps = steps"
    )
    for base in (huge.default_workload, cheapest_base(huge)):
        budget = Budget()
        sizes = plan(huge, base, budget)
        assert MAX_LADDER_POINTS - budget.left <= 200  # checks made, not values listed
        assert 1 < len(sizes) <= MAX_SIZES
        assert all(huge.is_admissible(**s.point) for s in sizes)
    assert cheapest_base(huge) == {"x": 1, "steps": 1}


def test_no_base_starts_at_the_cheapest_admissible_size():
    sd = load((SKELETONS / "custom_sd.wf").read_text(), "custom_sd", "custom_sd.wf")
    assert cheapest_base(sd) == {"steps": 1, "height": 8, "width": 8, "cfg": True}
    wan = load((SKELETONS / "wan.wf").read_text(), "wan2_1_t2v_1_3b", "wan.wf")
    assert cheapest_base(wan) == {"steps": 1, "frames": 1, "height": 16, "width": 16, "cfg": True}


def _planned_work(sk, base) -> int:
    """steps x pixels summed over every request the plan makes (ladder, the steps ladder one
    level up, the counted and the flipped sizes): the work a draft takes, before any clock."""
    steps = steps_param(sk)
    sizes = plan(sk, base)
    sizes += steps_across(sk, base, sizes)
    every = [*sizes, *counted(sizes, steps, base), *flipped(sk, sizes, steps, base)]
    return sum(int(s.point["steps"]) * s.point["height"] * s.point["width"] for s in every)


def test_no_base_plans_less_than_twice_the_work_of_a_base():
    sd = load((SKELETONS / "custom_sd.wf").read_text(), "custom_sd", "custom_sd.wf")
    with_base = _planned_work(sd, {**sd.default_workload, "steps": 2, "height": 32, "width": 32})
    without = _planned_work(sd, cheapest_base(sd))
    assert without < 2 * with_base, (without, with_base)
    default = _planned_work(sd, sd.default_workload)  # what no base used to mean
    assert default > 100 * without


WAN = (SKELETONS / "wan.wf").read_text()


@pytest.mark.parametrize("base", [{"steps": 2, "frames": 17, "height": 32, "width": 32}, None])
def test_a_ladder_holds_twenty_sizes_unless_asked_and_keeps_what_the_fits_need(base):
    """Wan's ladder held 27 sizes (22 + 5 steps one level up); by default 20, both parts
    together, with the base, the held-out sizes, each param's first levels and the factorial
    kept; the extra step counts and frames go in cheapest first. Asked for 48, all of them."""
    wan = load(WAN, "wan2_1_t2v_1_3b", "wan.wf")
    point = {**wan.default_workload, **base} if base else cheapest_base(wan)
    everything = plan(wan, point, most=MAX_SIZES)
    everything += steps_across(wan, point, everything, MAX_SIZES)
    sizes = plan(wan, point)
    sizes += steps_across(wan, point, sizes)
    assert len(everything) > DEFAULT_SIZES == len(sizes)
    kept = [s for s in everything if s.why == "base" or s.held_out or "jointly" in s.why]
    assert all(s in sizes for s in kept)
    for param in int_params(wan):  # every param still moves alone, twice at least
        assert len({s.point[param] for s in sizes if s.why == f"{param} alone"}) >= 2
    alone = [s for s in everything if s.why.endswith(" alone")]
    extra = [s for s in alone if [t.why for t in alone[: alone.index(s)]].count(s.why) >= 2]
    left_out = [s for s in everything if s not in sizes]
    assert left_out and all(s in extra or "one level up" in s.why for s in left_out)
    dearest = max(cost(wan, s.point) for s in extra if s in sizes)  # the cheapest extras went in
    assert all(cost(wan, s.point) >= dearest for s in left_out if s in extra)
    assert [s for s in everything if s in sizes] == sizes  # the ladder's order kept
    assert len(plan(wan, point, most=5)) == 5 and len(steps_across(wan, point, sizes, 5)) == 0


@st.composite
def skeletons(draw):
    """One to three int params, each a range, a default in it and maybe a `% k == r` contract;
    maybe one passed as num_inference_steps."""
    lines, calls = [], []
    for k in range(draw(st.integers(1, 3))):
        low = draw(st.integers(1, 64))
        high = draw(st.integers(low + 1, 10**6))
        modulus = draw(st.sampled_from([None, 2, 4, 8, 16]))
        rest = draw(st.integers(0, (modulus or 1) - 1))
        values = [
            v for v in range(low, min(high, low + 4096) + 1) if not modulus or v % modulus == rest
        ]
        if not values:
            continue
        default = draw(st.sampled_from(values))
        where = f" where p{k} % {modulus} == {rest}" if modulus else ""
        lines.append(f"    param p{k}: int = {default} in [{low}, {high}]{where}")
        calls.append(f"    call arg{k} = p{k}")
    if draw(st.booleans()):
        lines.append("    param steps: int = 20 in [1, 1000]")
        calls.append("    call num_inference_steps = steps")
    return "\n".join([*lines, *calls])


@settings(max_examples=60, deadline=None)
@given(body=skeletons(), cheapest=st.booleans())
def test_no_size_costs_more_than_the_default_and_every_size_is_admissible(body, cheapest):
    sk = _pipeline(body)
    base = cheapest_base(sk) if cheapest else sk.default_workload
    budget = Budget()
    sizes = plan(sk, base, budget)
    sizes += steps_across(sk, base, sizes)
    ceiling = max(cost(sk, sk.default_workload), cost(sk, base))
    assert sizes and sizes[0].point == dict(base)
    assert len(sizes) <= MAX_SIZES + 8 and budget.left >= 0
    for s in sizes:
        assert sk.is_admissible(**s.point)
        assert cost(sk, s.point) <= ceiling
        for p in int_params(sk):  # no level above the default (or the base, if above it)
            assert s.point[p] <= max(sk.default_workload[p], base[p])


@pytest.mark.slow
def test_no_base_drafts_the_tiny_sd_for_less_than_twice_the_work_of_a_base():
    """The runs themselves: steps x pixels over every request infer made (the ladder, the base's
    repeats, the counted and the flipped sizes), with no base and with one."""
    pytest.importorskip("diffusers")
    from calibration.examples.tiny_sd import build, call_kwargs
    from calibration.infer import infer

    skeleton = (SKELETONS / "custom_sd.wf").read_text()

    def work(inference) -> int:
        records = [
            *(m.record for m in inference.measured),
            *inference.repeats,
            *inference.work,
            *(m.record for m in inference.switched),
        ]
        return sum(
            int(r.params["steps"]) * int(r.params["height"]) * int(r.params["width"])
            for r in records
        )

    without = infer(build, skeleton, call_kwargs=call_kwargs)
    assert without.base == {"steps": 1, "height": 8, "width": 8, "cfg": True}
    based = infer(
        build, skeleton, base={"steps": 2, "height": 32, "width": 32}, call_kwargs=call_kwargs
    )
    assert work(without) < 2 * work(based), (work(without), work(based))
