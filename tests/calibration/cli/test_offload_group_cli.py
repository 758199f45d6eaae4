"""A component larger than the device, on the CPU: the tiny FLUX under a cap below its transformer
(326,656 bytes of weights) calibrates under `--calibrate-offload group` and `auto` (one block on
the device at a time), plans and validates at that capacity; a cap below the transformer's
weights outside its blocks and its largest block stops once, naming the component and the cap."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from calibration.cli.calibrate import calibrate
from calibration.cli.plan import plan

pytest.importorskip("accelerate")

TRANSFORMER = 326_656
CAP = 318 * 1024  # below the transformer; above its top-level weights and largest block together
SMALL = [
    "--example",
    "flux",
    "--warmup",
    "steps=1,height=16,width=16",
    "--probe",
    "steps=1,height=16,width=16",
    "--repeat",
    "1",
    "--no-time-probe",
]


@pytest.mark.parametrize("offload", ["group", "auto"])
def test_calibrates_a_transformer_larger_than_the_device(offload):
    args = [*SMALL, "--target", "steps=2,height=32,width=32", "--device-capacity", f"{CAP}B"]
    result = CliRunner().invoke(
        calibrate, [*args, "--calibrate-offload", offload, "--json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["component_weight_bytes"]["transformer"] == TRANSFORMER > CAP
    assert doc["calibrated_under"] == {"offload": "group", "capacity_bytes": CAP}
    assert all(r["ok"] for r in doc["records"]), doc["records"]
    phases = {p["label"]: p for p in doc["phases"]}
    denoise = phases["component:transformer@DenoisingStage"]
    assert denoise["weights_bytes"] < TRANSFORMER  # one block at a time, not the whole


def test_plans_and_validates_at_that_capacity():
    args = [*SMALL, "--target", "steps=2,height=16,width=16", "--device-capacity", f"{CAP}B"]
    device = ["--device-memory", f"{CAP}B", "--reserve", "0", "--validate"]
    result = CliRunner().invoke(plan, [*args, *device], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "transformer layerwise" in result.output
    assert result.output.splitlines()[-1].startswith("verdict: holds")


def test_a_block_larger_than_what_is_left_stops_once_with_the_component_named():
    args = [*SMALL, "--target", "steps=2,height=32,width=32", "--device-capacity", "250KiB"]
    result = CliRunner().invoke(
        calibrate, [*args, "--calibrate-offload", "group"], catch_exceptions=False
    )
    assert result.exit_code == 1, result.output
    assert "component transformer (326656 bytes of weights)" in result.stderr
    assert "--device-capacity 256000 bytes" in result.stderr
    assert "transformer_blocks.0" in result.stderr
    assert result.stderr.count("error") == 1
