"""`dslc infer`'s `time ~` choice: from the counted work (the same in every run), exact, then
approximate, else the memory's guess; the measured times only check it (the report's verdict,
never the draft's text), a burst measured again, a set the times fit instead named."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.infer.analyse import work_tiers
from calibration.infer.draft import line_text, time_lines
from calibration.infer.terms import features, monomials
from calibration.infer.time_terms import WORK_APPROXIMATE, check_times, choose_time
from runtime.estimate.fit.model import FitCache, Sample
from runtime.estimate.fit.noise import ONE_SPREAD, TIME_FLOOR, tolerance

CONTRACTS = {"frames": ("frames % 4 == 1",), "height": (), "width": ()}
TABLE = {p: features(p, c, steps=False) for p, c in CONTRACTS.items()}
PLAIN = monomials({p: TABLE[p][:1] for p in CONTRACTS})
BY_TEXT = {m.text: m for m in PLAIN}
TIERS = work_tiers(TABLE, list(CONTRACTS))


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
        out.append(Sample.at(p, value, k % 7 == 6, tolerance(ONE_SPREAD, value, spread * value)))
    return out


def _latent(p) -> int:
    return (p["frames"] - 1) // 4 + 1


def _work(count) -> list[Sample]:
    """Each size's counted work per iteration (``count(p)``), every 7th size held out."""
    return [Sample.at(p, float(count(p)), k % 7 == 6) for k, p in enumerate(_points())]


def _texts(choice) -> list[str]:
    return [m.text for m in choice.terms]


MEMORY = [BY_TEXT["height * width"]]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    spread=st.sampled_from([0.0, 0.02, 0.05, TIME_FLOOR]),
    burst=st.floats(0.1, 10.0),
)
def test_the_draft_s_time_lines_are_the_work_s_whatever_the_times(seed, spread, burst):
    """Two runs measure other times (noise, a burst at any size): the same lines."""

    def count(p):  # a constant + what grows with every latent frame's pixels
        return 5_000_000 + 3_000 * _latent(p) * p["height"] * p["width"]

    def seconds(p):
        return 0.02 + 4e-6 * p["height"] * p["width"]

    first = _samples(seconds, spread, seed)
    second = _samples(seconds, spread, seed + 1)
    k = seed % len(second)
    second[k] = Sample.at(second[k].point, second[k].value * burst, second[k].held_out, 0.01)
    a = choose_time(_work(count), first, MEMORY, TIERS, PLAIN, spread)
    b = choose_time(_work(count), second, MEMORY, TIERS, PLAIN, spread)
    assert time_lines(a) == time_lines(b)
    assert _texts(a) == ["latent_frames * height * width"] and a.source == "work"
    assert "exactly" in time_lines(a)[0] and "constant" in time_lines(a)[0]  # a rejected set


def test_an_attention_s_square_is_found_when_no_plain_set_is_exact():
    def count(p):
        tokens = p["height"] * p["width"]
        return 1_000_000 + 700 * tokens + 3 * tokens * tokens

    choice = choose_time(_work(count), [], MEMORY, TIERS, PLAIN, 0.0)
    assert choice.source == "work"
    assert _texts(choice) == ["height * width", "height * width * height * width"]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_work_off_every_set_by_a_little_is_approximate_and_by_much_a_guess(seed):
    rng = random.Random(seed)
    wobble = {tuple(p.items()): rng.uniform(-0.4, 0.4) * WORK_APPROXIMATE for p in _points()}

    def near(p):  # within WORK_APPROXIMATE of frames-free pixels, exactly none
        return 2_000 * p["height"] * p["width"] * (1 + wobble[tuple(p.items())])

    choice = choose_time(_work(near), [], MEMORY, TIERS, PLAIN, 0.0)
    assert choice.source == "approximate" and choice.terms
    assert f"within {WORK_APPROXIMATE:.0%} (APPROXIMATE: no set exactly)" in time_lines(choice)[0]
    noise = {tuple(p.items()): rng.choice([1, 9]) * 10**6 for p in _points()}
    guess = choose_time(_work(lambda p: noise[tuple(p.items())]), [], MEMORY, TIERS, PLAIN, 0.0)
    assert guess.source == "memory" and _texts(guess) == ["height * width"]
    assert "as a guess" in time_lines(guess)[0]
    assert line_text(time_lines(guess)[1]) == "time ~ height * width"


def test_a_constant_work_writes_no_time_line():
    choice = choose_time(_work(lambda p: 123_456), [], MEMORY, TIERS, PLAIN, 0.05)
    assert choice.terms == () and choice.source == "work"
    (line,) = time_lines(choice)
    assert line.startswith("# time per iteration:") and "(the default ~ 1)" in line


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.sampled_from([0.0, 0.02, 0.05]))
def test_times_off_the_work_s_terms_are_reported_with_the_set_they_fit(seed, spread):
    def count(p):  # the work says pixels
        return 1_000 + 3_000 * p["height"] * p["width"]

    def seconds(p):  # the times grow with every latent frame too (a slower kernel)
        return 0.002 + 1e-5 * _latent(p) * p["height"] * p["width"]

    choice = choose_time(
        _work(count), _samples(seconds, spread, seed), MEMORY, TIERS, PLAIN, spread
    )
    assert _texts(choice) == ["height * width"]  # the draft keeps the work's
    check = choice.measured
    assert not check.checked and check.worst > 1 and check.misses
    assert check.alternative == "latent_frames * height * width"
    assert check.rejected[0].text == "height * width"


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
    work = [_record(p, 7 + 11 * p["height"] * p["width"]) for p in points]  # the work counted

    def proposal(records):
        (p,) = propose(
            plans,
            records,
            base,
            ["height", "width"],
            {"height": (), "width": ()},
            None,
            [*(m.record for m in records if m.record.params == base and not m.again), *repeats],
            work,
        )
        return p

    first = proposal(measured)
    assert [m.text for m in first.memory.terms] == ["height * width"]
    assert [m.text for m in first.time.terms] == ["height * width"]  # the work's, exact
    assert first.time.source == "work" and len(first.work_samples) == len(points)
    assert not first.time.checked  # the burst is off the work's terms
    assert rechecks([first]) == [burst]
    from calibration.cli.infer import time_notes

    (note,) = time_notes([first])  # stderr's verdict, never the draft's text
    assert note.startswith("note[time]: DecodingStage: the measured times per iteration are off")
    assert "`time ~ height * width`" in note and "at 1 of 12 sizes" in note
    again = [*measured, Measured(_record(burst, seconds(burst)), False, again=True)]
    after = proposal(again)
    reversed_ = proposal(again[::-1]).time.measured
    assert (reversed_.checked, reversed_.misses) == (True, ())
    assert after.time.checked and after.time.measured.misses == ()
    assert time_notes([after]) == []
    assert len(after.time_samples) == len(points)  # the size measured twice counts once
    clean = proposal([Measured(_record(p, seconds(p)), False) for p in points])
    assert time_lines(first.time) == time_lines(after.time) == time_lines(clean.time)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(0.001, 0.1), min_size=15, max_size=15),
    spread=st.sampled_from([0.0, 0.05, 0.3]),
    pick=st.integers(0, len(PLAIN) - 1),
)
def test_a_set_fits_whenever_a_subset_of_it_does(values, spread, pick):
    """So the memory's terms are never rejected where the constant passes (flux's denoiser once
    was, by a least-squares fit that was not the one closest to the tolerance)."""
    from calibration.infer.time_terms import time_fit

    points = _points()[: len(values)]
    samples = [
        Sample.at(p, v, k % 5 == 4, tolerance(ONE_SPREAD, v, spread * v))
        for k, (p, v) in enumerate(zip(points, values, strict=False))
    ]
    alone = time_fit(samples, [])
    more = time_fit(samples, [PLAIN[pick]])
    assert alone is not None and more is not None
    assert more.worst <= alone.worst + 1e-9
    assert all(c >= 0 for c in more.slopes)


def test_a_missed_set_is_fitted_once_through_the_modeler():
    """The chosen set misses, so the check tries it again first among the alternatives: the
    modeler's cache fits it once, every set once, and reads it twice."""

    def seconds(p):
        return 0.02 + 4e-6 * p["height"] * p["width"]

    times = _samples(seconds, 0.0, 7)
    times[3] = Sample.at(times[3].point, times[3].value * 5, False, 0.002)  # a burst
    cache = FitCache()
    check = check_times(times, MEMORY, PLAIN, 0.0, cache)
    assert not check.checked and check.rejected[0].text == "height * width"
    assert set(cache.fitted.values()) == {1}
    assert cache.reads == len(cache.fitted) + 1
