"""`dslc infer`'s `time ~` choice on synthetic times: checked within the spread, the same choice
whatever the noise inside the spread, a term the memory lacks found, an honest UNCHECKED."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.infer.draft import time_lines
from calibration.infer.search import Sample
from calibration.infer.terms import features, monomials
from calibration.infer.time_terms import TIME_FLOOR, choose_time, tolerance

CONTRACTS = {"frames": ("frames % 4 == 1",), "height": (), "width": ()}
TABLE = {p: features(p, c, steps=False) for p, c in CONTRACTS.items()}
PLAIN = monomials({p: TABLE[p][:1] for p in CONTRACTS})
BY_TEXT = {m.text: m for m in PLAIN}


def _points():
    """A ladder like infer's: the base, each param alone, then jointly."""
    base = {"frames": 9, "height": 32, "width": 32}
    out = [base]
    out += [{**base, "frames": f} for f in (1, 5, 13, 17)]
    out += [{**base, "height": h} for h in (64, 96)]
    out += [{**base, "width": w} for w in (64, 96)]
    out += [
        {"frames": f, "height": h, "width": w} for f in (9, 13) for h in (32, 64) for w in (32, 64)
    ]
    return [dict(t) for t in dict.fromkeys(tuple(p.items()) for p in out)]


def _samples(seconds, spread: float, seed: int) -> list[Sample]:
    """Each size's time off its true value by up to the spread, either way."""
    rng = random.Random(seed)
    out = []
    for k, p in enumerate(_points()):
        value = seconds(p) * (1 + rng.uniform(-spread, spread))
        out.append(Sample(p, value, k % 7 == 6, tolerance(value, spread)))
    return out


def _latent(p) -> int:
    return (p["frames"] - 1) // 4 + 1


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.sampled_from([0.0, 0.02, 0.05, TIME_FLOOR]))
def test_noise_inside_the_spread_never_changes_the_choice(seed, spread):
    memory = [BY_TEXT["height * width"]]

    def seconds(p):  # 20 ms + what grows with the pixels: the memory's own term
        return 0.02 + 4e-6 * p["height"] * p["width"]

    choice = choose_time(_samples(seconds, spread, seed), memory, PLAIN, spread)
    assert choice.checked and choice.from_memory and choice.rejected == ()
    assert [m.text for m in choice.terms] == ["height * width"]
    assert choice.worst <= 1
    assert time_lines(choice) == time_lines(
        choose_time(_samples(seconds, spread, seed + 1), memory, PLAIN, spread)
    )


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.sampled_from([0.0, 0.02, 0.05]))
def test_a_time_growing_with_a_term_the_memory_lacks_is_found(seed, spread):
    memory = [BY_TEXT["height * width"]]

    def seconds(p):  # attention over every latent frame's tokens: the memory has no frames
        return 0.002 + 1e-5 * _latent(p) * p["height"] * p["width"]

    choice = choose_time(_samples(seconds, spread, seed), memory, PLAIN, spread)
    assert choice.checked and not choice.from_memory
    assert [m.text for m in choice.terms] == ["latent_frames * height * width"]
    assert choice.rejected[0].text == "height * width"  # the memory's set, first and rejected
    assert [r.text for r in choice.rejected][1] == "constant"
    lines = time_lines(choice)
    assert "the smallest set" in lines[0] and "rejected: height * width, constant" in lines[0]
    assert lines[1] == "time ~ latent_frames * height * width"


def test_times_no_set_explains_are_unchecked_and_the_memorys_terms_are_kept():
    memory = [BY_TEXT["height * width"]]
    rng = random.Random(7)
    samples = [Sample(p, rng.choice([0.01, 0.09]), False, tolerance(0.01, 0.0)) for p in _points()]
    choice = choose_time(samples, memory, PLAIN, 0.0)
    assert not choice.checked and [m.text for m in choice.terms] == ["height * width"]
    # every set tried once (the memory's is one of the search's singles)
    assert len(choice.rejected) == 1 + len(PLAIN) + len(PLAIN) * (len(PLAIN) - 1) // 2
    assert "UNCHECKED" in time_lines(choice)[0]
    assert time_lines(choice)[1] == "time ~ height * width"


def test_a_constant_time_writes_no_time_line():
    choice = choose_time(_samples(lambda p: 0.004, 0.05, 1), [], PLAIN, 0.05)
    assert choice.checked and choice.terms == ()
    (line,) = time_lines(choice)
    assert line.startswith("# time per iteration: constant") and "(the default ~ 1)" in line


def _record(point, seconds: float):
    """A CPU record of one single-run stage: memory 100 B a pixel (exact), ``seconds`` long."""
    from runtime.record import Phase, WarmupRecord

    peak = 100 * point["height"] * point["width"]
    phase = Phase("stage", "DecodingStage", "DecodingStage", 1, 0, peak, peak, seconds)
    return WarmupRecord("p", "cpu", "cpu", point, None, 0, peak, peak, seconds, (phase,))


def test_a_burst_at_one_size_is_measured_again_and_the_least_time_is_kept():
    from calibration.infer.analyse import Measured, propose
    from calibration.infer.layout import StagePlan, Use
    from calibration.infer.run import rechecks

    plans = [StagePlan("DecodingStage", (Use("vae", "decode"),), False)]
    base = {"height": 32, "width": 32}
    points = [{"height": h, "width": w} for h in (32, 64, 96, 128) for w in (32, 64, 96)]

    def seconds(p):
        return 0.002 + 2e-6 * p["height"] * p["width"]

    burst = {"height": 64, "width": 64}
    measured = [Measured(_record(p, seconds(p) * (3 if p == burst else 1)), False) for p in points]
    repeats = [_record(base, seconds(base) * 1.02), _record(base, seconds(base) * 0.99)]

    def proposal(records):
        (p,) = propose(
            plans,
            records,
            base,
            ["height", "width"],
            {"height": (), "width": ()},
            None,
            [*(m.record for m in records if m.record.params == base and not m.again), *repeats],
        )
        return p

    first = proposal(measured)
    assert [m.text for m in first.memory.terms] == ["height * width"]
    assert first.time.rejected[0].text == "height * width"  # the burst rejects it
    assert rechecks([first]) == [burst]
    again = [*measured, Measured(_record(burst, seconds(burst)), False, again=True)]
    after = proposal(again)
    assert time_lines(proposal(again[::-1]).time) == time_lines(after.time)
    assert after.time.checked and after.time.from_memory and after.time.misses == ()
    assert len(after.time_samples) == len(points)  # the size measured twice counts once
    clean = proposal([Measured(_record(p, seconds(p)), False) for p in points])
    assert time_lines(after.time) == time_lines(clean.time)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(0.001, 0.1), min_size=15, max_size=15),
    spread=st.sampled_from([0.0, 0.05, 0.3]),
    pick=st.integers(0, len(PLAIN) - 1),
)
def test_a_set_fits_whenever_a_subset_of_it_does(values, spread, pick):
    """So the memory's terms are never rejected where the constant passes (flux's denoiser once
    was, by a least-squares fit that was not the one closest to the tolerance)."""
    from calibration.infer.time_terms import nonnegative_fit

    points = _points()[: len(values)]
    samples = [
        Sample(p, v, k % 5 == 4, tolerance(v, spread))
        for k, (p, v) in enumerate(zip(points, values, strict=False))
    ]
    alone = nonnegative_fit(samples, [])
    more = nonnegative_fit(samples, [PLAIN[pick]])
    assert alone is not None and more is not None
    assert more.worst <= alone.worst + 1e-9
    assert all(c >= 0 for c in more.slopes)
