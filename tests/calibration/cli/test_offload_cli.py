"""A pipeline larger than its device, on the CPU: `dslc calibrate` and `dslc plan --validate` under
--device-capacity, with diffusers' model CPU offload, and a component seen only by its weight reads.

The pipeline (tests/calibration/data/two_tower.py) holds 785 KiB of weights: a text tower of
520 KiB run only through `get_text_features`, a denoiser of 264 KiB, and a spare component of
1 KiB that never runs. The device is capped at 640 KiB: each component fits with its work, the
pipeline does not.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from calibration.calibrate.verdict import STRICT_FAILED
from calibration.cli.calibrate import calibrate
from calibration.cli.plan import plan
from tests.calibration.cli.runs import TOWERS_CAP, TWO_TOWERS

pytest.importorskip("accelerate")


def test_calibrates_under_model_offload_and_accounts_for_every_component():
    result = CliRunner().invoke(
        calibrate, [*TWO_TOWERS, "--json", "--strict"], catch_exceptions=False
    )
    assert result.exit_code == STRICT_FAILED, result.output  # the spare never ran
    doc = json.loads(result.stdout)
    weights = doc["component_weight_bytes"]
    assert sum(weights.values()) > TOWERS_CAP
    assert doc["calibrated_under"] == {"offload": "model", "capacity_bytes": TOWERS_CAP}
    assert all(r["ok"] for r in doc["records"]), doc["records"]
    phases = {p["label"]: p for p in doc["phases"]}
    text = phases["stage:TextEncodingStage"]
    assert text["active_components"] == ["text_tower"]  # seen by its reads, not its forward
    assert text["weights_bytes"] == weights["text_tower"]  # one offloaded component at a time
    denoise = phases["component:denoiser@DenoisingStage"]
    assert denoise["weights_bytes"] == weights["denoiser"]
    assert all(p["bound_peak_bytes"] <= TOWERS_CAP for p in doc["phases"])
    assert doc["unobserved_components"] == ["spare"]
    assert "warning[unobserved-component]: component 'spare'" in result.stderr


def test_plans_applies_and_validates_under_the_cap():
    args = [*TWO_TOWERS, "--device-memory", "640KiB", "--reserve", "0", "--validate"]
    result = CliRunner().invoke(plan, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "text_tower offloaded" in result.output  # never resident: it does not fit beside both
    assert "validate  holds" in result.output
    assert result.output.splitlines()[-1].startswith("verdict: holds")


def test_no_offload_under_a_cap_smaller_than_the_weights_is_a_user_error():
    args = [*TWO_TOWERS, "--calibrate-offload", "none"]
    result = CliRunner().invoke(calibrate, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "do not fit --device-capacity 655360 bytes" in result.stderr
    assert "--calibrate-offload model or group" in result.stderr
