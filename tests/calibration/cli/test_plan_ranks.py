"""`dslc plan` with one --device-memory per --calibration: each calibration a rank on its own
device (issue 31, item 3; docs/planning.md "Ranks")."""

from __future__ import annotations

import json

from click.testing import CliRunner

from calibration.cli.plan import plan
from calibration.plan import GiB
from tests.calibration.cli.test_plan import WEIGHTS, calibration_document


def saved(tmp_path, name: str, decode_bound: int = 6 * GiB) -> str:
    """A saved FLUX-sized calibration whose decoding holds ``decode_bound`` of activations."""
    doc = calibration_document()
    doc["phases"][2]["bound_peak_bytes"] = sum(WEIGHTS.values()) + decode_bound
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def run(*args: str):
    return CliRunner().invoke(plan, list(args), catch_exceptions=False)


def test_a_24_and_a_140_gib_rank_each_get_their_own_placement(tmp_path):
    """The 24 GiB rank cannot onload the 24 GiB transformer whole: it streams it, keeping its
    4 GiB rest. The 140 GiB rank decodes with 134 GiB of activations: the rest cannot stay."""
    small, big = saved(tmp_path, "r0.json"), saved(tmp_path, "r1.json", 134 * GiB)
    result = run(
        "--calibration", small, "--calibration", big,
        "--device-memory", "24GiB", "--device-memory", "140GiB", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["agreement"] == "per-rank"
    first, second = doc["ranks"]
    kinds = [{c["name"]: c["placement"] for c in r["components"]} for r in doc["ranks"]]
    assert kinds[0]["transformer"] == "layerwise" and kinds[1]["transformer"] == "offloaded"
    assert first["device"]["capacity_bytes"] == 24 * GiB
    assert second["device"]["capacity_bytes"] == 140 * GiB
    assert all(u["headroom_bytes"] >= 0 for r in doc["ranks"] for u in r["phases"])


def test_ranks_that_can_share_one_placement_share_it(tmp_path):
    a, b = saved(tmp_path, "r0.json"), saved(tmp_path, "r1.json")
    result = run(
        "--calibration", a, "--calibration", b,
        "--device-memory", "24GiB", "--device-memory", "140GiB",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"rank 0 ({a}): common\ndevice 24 GiB")
    assert f"rank 1 ({b}): common\ndevice 140 GiB" in result.stdout
    assert result.stdout.count("transformer   layerwise 18/40") == 2  # the same placement
    assert "TextEncodingStage (missing 11 GiB)" in result.stdout  # binds on the 24 GiB rank only


def test_device_memories_must_match_the_calibrations(tmp_path):
    a = saved(tmp_path, "r0.json")
    result = run("--calibration", a, "--device-memory", "24GiB", "--device-memory", "40GiB")
    assert result.exit_code == 2 and "one per --calibration" in result.output
