"""A request's measurements do not depend on the request before it
(``calibration.core.session``)."""

from __future__ import annotations

import pytest

from tests.calibration.conftest import FORMULAS


@pytest.fixture(scope="module")
def pixart():
    """formulas/pixart_sigma.wf's PixArt-Sigma 1024: a DPM-Solver (multistep) pipeline."""
    from calibration.calibrate.run import load_pipeline

    return load_pipeline(FORMULAS / "pixart_sigma.wf", "pixart_sigma_1024")


def _above_baseline(record, stage: str) -> int:
    (phase,) = (p for p in record.phases if p.kind == "stage" and p.name == stage)
    return record.above_baseline(phase.peak_allocated)


def test_the_previous_requests_scheduler_history_is_not_in_the_next_baseline(pixart):
    # DPM-Solver keeps its last two model outputs (latent-sized) until its next set_timesteps. A
    # request that frees the previous request's history only after its baseline was read measured
    # every stage of a 64x64 request 6,144 B lower after a 128x128 one than after a 64x64 one: the
    # false `formula-mismatch` on PixArt's TextEncodingStage memory (docs/formulas.md).
    from calibration.core.host import quiet_libraries
    from calibration.core.session import Session
    from calibration.examples import EXAMPLES

    example = EXAMPLES["pixart"]
    small = {"steps": 3, "height": 64, "width": 64, "cfg": True}
    large = {"steps": 3, "height": 128, "width": 128, "cfg": True}
    with quiet_libraries():
        session = Session(example.build(0), pixart, "cpu", call_kwargs=example.call_kwargs)
        first = session.run(small)
        after_small = session.run(small)
        session.run(large)
        after_large = session.run(small)
    assert first.ok and after_small.ok and after_large.ok
    assert after_large.baseline_allocated == after_small.baseline_allocated
    for stage in pixart.stages:
        assert _above_baseline(after_large, stage) == _above_baseline(after_small, stage), stage
