"""Layer uses per stage at the target, by hand (toy: DenoisingStage iterations = steps * blocks)."""

from __future__ import annotations

from runtime.estimate import estimate, estimate_layerwise_layer_uses
from runtime.record import LayerUse, StageIterations
from tests.runtime.estimate.conftest import record

USES = [
    LayerUse("transformer", "blocks.0", "DenoisingStage", 8),
    LayerUse("transformer", "blocks.1", "DenoisingStage", 3),
    LayerUse("vae", "decoder.up.0", "DecodingStage", 1),
    LayerUse("text_encoder", "layers.0", None, 2),
    LayerUse("refiner", "blocks.0", "RefinerStage", 5),
]


def calls(result):
    return {(u.component, u.layer, u.stage): (u.calls, u.method) for u in result}


def test_calls_scale_by_each_stages_own_iterations(toy):
    # measured 4 iterations (the probe ran steps=4), target 10: ceil(8 * 10 / 4) = 20,
    # ceil(3 * 10 / 4) = ceil(7.5) = 8; once-used, outside-stage and unknown-stage uses stay.
    probe = record(
        {"steps": 4},
        layer_uses=USES,
        stage_iterations=[StageIterations("DenoisingStage", 4, 10, "counted")],
    )
    assert calls(estimate_layerwise_layer_uses([probe], toy)) == {
        ("transformer", "blocks.0", "DenoisingStage"): (20, "scaled"),
        ("transformer", "blocks.1", "DenoisingStage"): (8, "scaled"),
        ("vae", "decoder.up.0", "DecodingStage"): (1, "measurement"),
        ("text_encoder", "layers.0", None): (2, "measurement"),
        ("refiner", "blocks.0", "RefinerStage"): (5, "measurement"),
    }


def test_measured_iterations_come_from_the_formula_when_not_recorded(toy):
    # no stage_iterations in the record: steps=2, blocks=2 -> 4 iterations; target steps 6 (blocks
    # 1) -> 6: ceil(8 * 6 / 4) = 12 and ceil(3 * 6 / 4) = ceil(4.5) = 5.
    probe = record({"steps": 2, "blocks": 2}, layer_uses=USES[:2])
    result = estimate([probe], toy, target={"steps": 6})
    assert [u.calls for u in result.layer_uses] == [12, 5]
    assert result.layer_calls() == {("transformer", "blocks.0"): 12, ("transformer", "blocks.1"): 5}
    assert (result.layer_uses[0].measured_iterations, result.layer_uses[0].target_iterations) == (
        4,
        6,
    )


def test_the_largest_figure_across_records_wins(toy):
    a = record({"steps": 4}, layer_uses=[LayerUse("transformer", "blocks.0", "DenoisingStage", 8)])
    b = record({"steps": 5}, layer_uses=[LayerUse("transformer", "blocks.0", "DenoisingStage", 11)])
    # a: 8 * 10 / 4 = 20; b: ceil(11 * 10 / 5) = 22.
    assert [u.calls for u in estimate_layerwise_layer_uses([a, b], toy)] == [22]
