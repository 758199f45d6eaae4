"""The plan predicts the request's time (issue 31, item 4): the calibration's compute plus the
host-to-device transfer the plan adds, none of it hidden (docs/planning.md "Speed")."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.plan import Component, Device, GiB, Phase, Target, solve
from calibration.plan.inputs import load_calibration
from calibration.plan.report import document

GB = 10**9
DATA = Path(__file__).resolve().parents[1] / "data"


def two_shapes() -> tuple[list[Component], list[Target]]:
    """A transformer of 4 blocks of 1 GiB (+1 GiB rest) run 10 or 20 times, a 2 GiB encoder."""
    comps = [Component.uniform("transformer", 5 * GiB, 4, GiB), Component("encoder", 2 * GiB)]
    phases = [Phase("encode", 0, ["encoder"]), Phase("denoise", GiB, ["transformer"])]
    return comps, [
        Target("short", phases, layer_uses={"transformer": (10,) * 4}, compute_s=1.5),
        Target("long", phases, layer_uses={"transformer": (20,) * 4}, weight=3, compute_s=3.0),
    ]


def test_each_target_is_its_compute_plus_what_its_own_request_moves():
    comps, targets = two_shapes()
    plan = solve(comps, targets, Device(5 * GiB, reserve_bytes=0, bandwidth_bytes_per_s=10 * GB))
    transformer = plan.placement("transformer")
    assert transformer.kind == "layerwise" and len(transformer.resident_layers) == 2
    assert plan.placement("encoder").kind == "offloaded"
    short, long = plan.predicted("short"), plan.predicted("long")
    # short: 2 streamed blocks x 10 calls + the encoder once; long: x 20 calls
    assert short.transfer_s == pytest.approx((2 * 10 + 2) * GiB / (10 * GB))
    assert long.transfer_s == pytest.approx((2 * 20 + 2) * GiB / (10 * GB))
    assert short.hidden_s == 0 and short.exposed_s == short.transfer_s  # no overlap modelled
    assert short.seconds == pytest.approx(1.5 + short.transfer_s)
    assert plan.predicted_seconds == pytest.approx(short.seconds + 3 * long.seconds)
    # the weighted transfer is the plan's objective, in the same seconds
    assert plan.transfer_s == pytest.approx(short.transfer_s + 3 * long.transfer_s)
    doc = document(plan, comps)
    assert [t["predicted_s"] for t in doc["times"]] == [short.seconds, long.seconds]
    assert doc["predicted_s"] == plan.predicted_seconds


def test_a_target_without_compute_time_predicts_no_request_time():
    comps, (short, long) = two_shapes()
    plan = solve(comps, [short, Target("x", long.phases)], Device(64 * GiB, reserve_bytes=0))
    assert plan.predicted("short").seconds == 1.5  # all resident: nothing moves
    assert plan.predicted("x").compute_s is None and plan.predicted("x").seconds is None
    assert plan.predicted_seconds is None


def test_a_saved_calibration_gives_its_predicted_compute():
    cal = load_calibration(DATA / "flux_calibration.json")
    assert cal.target.compute_s == pytest.approx(0.049382)
    assert dict(cal.target.stage_seconds) == pytest.approx(
        {"TextEncodingStage": 0.007415, "DenoisingStage": 0.022923, "DecodingStage": 0.013624}
    )
    plan = solve(cal.components, [cal.target], Device(1 << 20, reserve_bytes=0))
    (time,) = plan.times
    assert dict(time.stage_seconds) == dict(cal.target.stage_seconds)
    assert document(plan)["times"][0]["stages_s"]["DenoisingStage"] == pytest.approx(0.022923)
    assert time.transfer_s == pytest.approx(plan.transfer_s)
    assert time.seconds == pytest.approx(0.049382 + plan.transfer_s)
