"""The grouped placement end to end on the tiny FLUX (CPU): where the VAE whole and its decode do
not fit but grouped does, `dslc plan --validate` holds with the VAE grouped; a saved plan with it
round-trips through the schema and `--calibrate-offload plan:FILE`; hostile plan documents are
refused with a typed error naming the place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.core.weights import weight_bytes
from calibration.examples.flux import build
from calibration.placement.pipeline import block_groups
from calibration.plan.model import PlacementKind
from calibration.plan.saved import PlanFileError, read_plan
from dslc.cli import cli
from tests.calibration.cli.runs import SMALL_FLUX

pytest.importorskip("accelerate")

#: Below the decode's peak with the VAE whole (about 761 KiB), above it with the VAE grouped.
CAP = "720KiB"


def _dslc(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    result = _dslc("plan", *SMALL_FLUX, "--reserve", "0", "--device-memory", CAP, "--json")
    assert result.exit_code == 0, result.output
    path = tmp_path_factory.mktemp("plans") / "grouped.json"
    path.write_text(result.stdout)
    return path


def test_validate_holds_with_the_vae_grouped_where_whole_it_does_not_fit():
    result = _dslc(
        "plan", *SMALL_FLUX, "--reserve", "0", "--device-memory", CAP, "--validate", "--json"
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["validated"] and doc["placement"]["vae"] == "grouped"
    validate = next(s for s in doc["steps"] if s["name"] == "validate")
    decode = next(p for p in validate["phases"] if p["label"] == "component:vae@DecodingStage")
    assert decode["measured_bytes"] is not None
    assert decode["predicted_bytes"] >= decode["measured_bytes"]
    vae = build(0).vae  # the VAE whole in place of its largest group and the rest: over the cap
    groups = block_groups(vae)
    grouped_onload = weight_bytes(vae) - sum(groups) + max(groups)
    whole = decode["predicted_bytes"] - grouped_onload + weight_bytes(vae)
    assert whole > decode["usable_bytes"] >= decode["predicted_bytes"]


def test_a_saved_grouped_plan_round_trips_and_calibrates_under_its_cap(saved):
    doc = json.loads(saved.read_text())
    vae = next(c for c in doc["components"] if c["name"] == "vae")
    assert vae["placement"] == "grouped"
    assert tuple(vae["group_bytes"]) == block_groups(build(0).vae)
    plan = read_plan(saved).plan.placement("vae")
    assert (plan.kind, plan.group_bytes) == (PlacementKind.GROUPED, tuple(vae["group_bytes"]))
    result = _dslc(
        "calibrate",
        *SMALL_FLUX,
        "--device-capacity",
        CAP,
        "--calibrate-offload",
        f"plan:{saved}",
        "--json",
    )
    assert result.exit_code == 0, result.output
    calibrated = json.loads(result.stdout)
    assert all(r["ok"] for r in calibrated["records"]), calibrated["records"]
    assert calibrated["calibrated_under"]["placement"]["vae"] == "grouped"
    assert calibrated["group_bytes"]["vae"] == vae["group_bytes"]


def _edited(saved: Path, tmp_path: Path, **vae: object) -> Path:
    doc = json.loads(saved.read_text())
    for c in doc["components"]:
        if c["name"] == "vae":
            c.update(vae)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"placement": "scattered"}, r"components\[0\]\.placement: 'scattered' is not one of"),
        ({"group_bytes": []}, "a grouped component needs its block groups"),
        ({"placement": "offloaded"}, "only a grouped one is onloaded group by group"),
        ({"group_bytes": [1] * 5000}, "MAX_PLAN_LAYERS"),
        ({"group_bytes": [-1]}, r"components\[0\]\.group_bytes\[0\]"),
    ],
)
def test_a_hostile_plan_document_is_refused_with_a_typed_error(saved, tmp_path, edit, message):
    with pytest.raises(PlanFileError, match=message):
        read_plan(_edited(saved, tmp_path, **edit))


def test_group_sizes_that_do_not_match_the_pipeline_are_refused(saved, tmp_path):
    path = _edited(saved, tmp_path, group_bytes=[1, 2, 3])
    assert read_plan(path).plan.placement("vae").group_bytes == (1, 2, 3)  # the file alone: fine
    result = _dslc(
        "calibrate", *SMALL_FLUX, "--device-capacity", CAP, "--calibrate-offload", f"plan:{path}"
    )
    assert result.exit_code == 1, result.output
    assert "components[0].group_bytes: 3 block group(s) of 6 bytes" in result.output
    assert "a plan of another pipeline" in result.output
