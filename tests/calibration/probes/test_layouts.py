"""Records whose active components differ (a second expert that runs only at some sizes) are fitted
per layout, never pooled or scaled from one layout to the other: the checks
(calibration.probes.findings.check) and the estimate (runtime.estimate) both."""

from __future__ import annotations

import pytest

from calibration.probes.findings import check
from runtime import Pipeline
from runtime.estimate import estimate
from runtime.estimate.fit import FindingKind, Quantity
from tests.runtime.estimate.conftest import TOY, record, stage


@pytest.fixture(scope="module")
def toy() -> Pipeline:
    from dslc.build import load_text

    return load_text(TOY, "toy.wf")["toy"]


ONE = ("transformer",)
TWO = ("transformer", "transformer_2")
TARGET = {"steps": 10, "size": 100, "blocks": 1}


def sized(size: int, active: tuple[str, ...]) -> object:
    """A record at ``size``: 100 B of denoising memory a unit, 5,000 B more with the second
    expert."""
    extra = 5000 if len(active) == 2 else 0
    return record(
        {"size": size},
        phases=[
            stage("TextEncodingStage", 1000),
            stage("DenoisingStage", 1000 + extra + 100 * size, active=active),
            stage("DecodingStage", 1000 + 200 * size),
        ],
    )


RECORDS = [
    sized(10, ONE),  # the first request: left out of the checks (one-time costs)
    sized(10, ONE),
    sized(20, ONE),
    sized(30, ONE),
    sized(40, TWO),
    sized(50, TWO),
    sized(60, TWO),
]


def test_two_layouts_are_checked_apart(toy):
    checked = check(toy, RECORDS, TARGET, "cpu-live-tensors")
    fits = checked.fits_of("DenoisingStage", Quantity.MEMORY)
    assert sorted(f.layout for f in fits) == [ONE, TWO]
    for fit in fits:
        assert fit.estimable and not fit.off  # each layout's sizes lie on its own line
    expected = {ONE: 100 * 100, TWO: 5000 + 100 * 100}
    assert {f.layout: round(f.at_target) for f in fits} == expected
    assert not [f for f in checked.findings if f.stage == "DenoisingStage"]


def test_two_layouts_are_estimated_apart(toy):
    result = estimate(RECORDS, toy, target=TARGET)
    denoising = {p.label: p for p in result.phases if p.stage == "DenoisingStage"}
    assert sorted(denoising) == ["stage:DenoisingStage#layout1", "stage:DenoisingStage#layout2"]
    raw = {p.active_components: p.peak.raw_bytes for p in denoising.values()}
    assert raw == {ONE: 1000 + 100 * 100, TWO: 1000 + 5000 + 100 * 100}
    for p in denoising.values():
        assert p.peak.method == "fit"
        assert {pt.measure for pt in p.peak.points} == (
            {10, 20, 30} if p.active_components == ONE else {40, 50, 60}
        )


def test_a_finding_never_comes_from_pooling_layouts(toy):
    # pooled, the first layout's sizes sit 5,000 B under the line through the second's, and were
    # taken for probes outside the steady regime (a probe-regime finding that left them out of the
    # estimate); per layout, nothing is off
    kinds = {f.kind for f in check(toy, RECORDS, TARGET, "cpu-live-tensors").findings}
    assert not kinds & {FindingKind.PROBE_REGIME, FindingKind.FORMULA_MISMATCH}
