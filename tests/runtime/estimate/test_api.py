"""The entry points: the seed's names agree with `estimate`, results are frozen, no torch import."""

from __future__ import annotations

import subprocess
import sys

import attrs
import pytest

import runtime.estimate as est
from runtime.record import LayerUse, StageIterations
from tests.runtime.estimate.conftest import phase, record, stage, steps


@pytest.fixture
def records():
    return [
        record(
            {"size": s, "steps": 3},
            phases=[
                stage("TextEncodingStage", 1500, 0.05),
                stage("DenoisingStage", p, 0.6),
                stage("DecodingStage", 2 * p, 0.3),
                phase("component", "transformer", "DenoisingStage", p),
            ],
            iterations=steps("DenoisingStage", [0.3, 0.1, 0.1]),
            duration=1.0,
            stage_iterations=[StageIterations("DenoisingStage", 3, 10, "counted")],
            layer_uses=[LayerUse("transformer", "blocks.0", "DenoisingStage", 6)],
        )
        for s, p in ((10, 1700), (20, 2200))
    ]


def test_the_seed_names_compute_the_parts_of_estimate(toy, records):
    whole = est.estimate(
        records, toy, target={"size": 50}, margin=1.3, component_weight_bytes={"transformer": 5}
    )
    kwargs = {"target": {"size": 50}}
    assert (
        est.estimate_phase_peaks(
            records, toy, margin=1.3, component_weight_bytes={"transformer": 5}, **kwargs
        )
        == whole.phases
    )
    assert (
        est.estimate_peak_bytes(
            records, toy, margin=1.3, component_weight_bytes={"transformer": 5}, **kwargs
        )
        == whole.request_peak
    )
    assert est.estimate_timing(records, toy, **kwargs) == whole.timing
    assert est.estimate_layerwise_layer_uses(records, toy, **kwargs) == whole.layer_uses
    assert est.estimate_iteration_growth(records, toy, **kwargs) == whole.growth
    assert dict(whole.target) == {"steps": 10, "size": 50, "blocks": 1}
    assert whole.peak_bytes == whole.request_peak.bound_bytes
    # the fit on sizes 10 and 20 at 50: 1200 + 50 * 50 = 3700 raw, 1200 + 2500 * 1.3 = 4450 bound.
    assert (
        whole.phase("stage:DenoisingStage").peak.raw_bytes,
        whole.phase("stage:DenoisingStage").peak.bound_bytes,
    ) == (3700, 4450)
    with pytest.raises(KeyError):
        whole.phase("stage:Nope")


def test_results_are_frozen(toy, records):
    whole = est.estimate(records, toy)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        whole.margin = 2.0
    with pytest.raises(TypeError):
        whole.target["size"] = 1
    assert hash(whole.request_peak) == hash(est.estimate(records, toy).request_peak)


def test_no_records_means_no_figures(toy):
    whole = est.estimate([], toy)
    assert (whole.phases, whole.request_peak.method, whole.timing.method, whole.layer_uses) == (
        (),
        "none",
        "none",
        (),
    )


def test_importing_the_estimators_does_not_import_torch():
    code = (
        "import sys, runtime.estimate; print('torch' in sys.modules, 'lark' in sys.modules, "
        "'sympy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False", "False"]
