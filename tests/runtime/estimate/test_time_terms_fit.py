"""The time fit uses a stage's declared time terms (`time ~ [size, size * size]`): per-iteration
time = constant + one slope per term, fitted over the measured sizes (numbers by hand)."""

from __future__ import annotations

import pytest

from runtime import Pipeline
from runtime.estimate import estimate_timing
from runtime.record import StageIterations, WarmupRecord
from tests.runtime.estimate.conftest import record, stage, steps

ATTENTION = """
pipeline toy {
    param steps: int = 10 in [1, 1000]
    param size: int = 100 in [1, 100000]
    param blocks: int = 1 in [1, 64]  # unused; the shared record builder sets it

    stage TextEncodingStage { iterations = 1 }
    stage DenoisingStage {
        iterations = steps
        time ~ [size, size * size]  # per-token work + attention over token pairs
    }
    stage DecodingStage { time ~ size }
}
"""


def compiled(text: str, name: str) -> Pipeline:
    from dslc.build import load_text

    return load_text(text, f"{name}.wf")[name]


@pytest.fixture(scope="module")
def attention() -> Pipeline:
    return compiled(ATTENTION, "toy")


def per_iteration(size: int) -> float:
    """The true per-iteration time: 0.01 s + 0.001 s x size + 0.0001 s x size^2."""
    return 0.01 + 0.001 * size + 0.0001 * size * size


def timed(size: int) -> WarmupRecord:
    """Three denoising iterations (the first, a slower warmup one, is dropped), nothing outside."""
    t = per_iteration(size)
    denoise = [2 * t, t, t]
    return record(
        {"size": size, "steps": 3},
        phases=[
            stage("TextEncodingStage", 1, 0.05),
            stage("DenoisingStage", 1, sum(denoise)),
            stage("DecodingStage", 1, 0.5),
        ],
        iterations=steps("DenoisingStage", denoise),
        duration=0.55 + sum(denoise),
        stage_iterations=[StageIterations("DenoisingStage", 3, 10, "counted")],
    )


RECORDS = [timed(10), timed(20), timed(40)]  # per iteration 0.03, 0.07, 0.21


def test_two_time_terms_are_fitted_exactly(attention: Pipeline) -> None:
    # three sizes, three unknowns (constant, size slope, size^2 slope): the fit is exact, and at
    # size 100 per iteration is 0.01 + 0.1 + 1.0 = 1.11 s, x 10 target iterations = 11.1 s.
    assert attention.time_terms("DenoisingStage", size=20) == (20, 400)
    denoise = estimate_timing(RECORDS, attention).stage("DenoisingStage")
    assert denoise.method == "fit"
    assert denoise.per_iteration_s == pytest.approx(per_iteration(100))
    assert denoise.seconds == pytest.approx(10 * per_iteration(100))
    assert "measures [10, 100], [20, 400], [40, 1600]" in denoise.reason
    assert "s x term 2" in denoise.reason


def test_one_time_term_misses_the_quadratic_part(attention: Pipeline) -> None:
    # The same measurements under `time ~ size` fit a line through (10, 0.03), (20, 0.07),
    # (40, 0.21) (unweighted: slope 0.00614, constant -0.04, 0.574 s at size 100; the estimators
    # weigh each size by its noise, which moves the line but not past the curve): well under the
    # true 1.11 s, what the second term is for.
    single = compiled(ATTENTION.replace("[size, size * size]", "size"), "toy")
    linear = estimate_timing(RECORDS, single).stage("DenoisingStage")
    assert linear.per_iteration_s is not None
    assert linear.per_iteration_s < 0.6 * per_iteration(100)


POWERS = ATTENTION.replace("time ~ [size, size * size]", "time ~ size ** 60 * size ** 60")


@pytest.mark.parametrize("records", [RECORDS, RECORDS[:1]], ids=["fitted", "scaled"])
def test_a_time_carried_past_a_float_is_no_estimate_with_its_reason(records) -> None:
    """issue 39: `time ~ height ** 60 * height ** 60` at a large target was an OverflowError in
    the fit's arithmetic (exit 3 from `dslc plan`); it is a stage without a time, saying why."""
    powers = compiled(POWERS, "toy")
    target = {"steps": 10, "size": 100_000, "blocks": 1}
    timing = estimate_timing(records, powers, target)
    denoise = timing.stage("DenoisingStage")
    assert denoise.method == "none" and denoise.seconds is None
    assert "past what a float holds" in denoise.reason
    assert timing.seconds is None
    assert estimate_timing(records, powers, {**target, "size": 20}).seconds is not None
