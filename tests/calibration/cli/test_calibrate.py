"""`dslc calibrate` end to end on real (tiny) diffusers pipelines, and its usage errors.

The pipelines are built from tiny configs with random weights on the CPU; the runs are a few hundred
milliseconds each. Memory on the CPU is counted exactly (live tensors), so the accuracy of the peak
estimates is asserted; times are not (a shared machine's clocks are noisy).
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from calibration.calibrate.loop import BUDGET
from calibration.cli.calibrate import calibrate
from runtime.record import load_records

pytest.importorskip("diffusers")


def invoke(*args: str):
    return CliRunner().invoke(calibrate, list(args), catch_exceptions=False)


def test_dslc_finds_calibrate_as_a_plugin_command():
    from dslc.cli import cli

    assert "calibrate" in cli.list_commands(click.Context(cli))
    assert cli.get_command(click.Context(cli), "calibrate") is calibrate


@pytest.mark.slow
def test_wan_verify_json_plot_and_records(tmp_path):
    plot, records = tmp_path / "wan.png", tmp_path / "records.json"
    result = invoke(
        "--verify",
        "--json",
        "--repeat",
        "1",
        "--plot",
        str(plot),
        "--records",
        str(records),
        "--no-time-probe",  # the runs then depend on the formulas alone, not on timings
    )
    assert result.exit_code == 0, result.output
    # not a terminal: one progress line per step on stderr, and a line for every file written
    steps = [line for line in result.stderr.splitlines() if line.startswith("calibrate [")]
    assert len(steps) >= 5 and steps[-1].endswith("done"), result.stderr
    assert f"wrote {plot} (the plot)" in result.stderr
    assert f"wrote {records} (the warmup records)" in result.stderr
    doc = json.loads(result.stdout)
    assert (doc["example"], doc["pipeline"], doc["verified"], doc["device"]) == (
        "wan",
        "wan2_1_t2v_1_3b",
        True,
        "cpu",
    )
    assert doc["target"] == {"steps": 8, "frames": 17, "height": 64, "width": 64, "cfg": True}
    assert doc["work_ratio"] >= 4
    # The probe, then a size moving steps alone and one moving height alone (coverage: the target
    # departs in both), then the re-warm; every extra size cheaper than the target together.
    roles = [r["role"] for r in doc["records"]]
    assert roles[:2] == ["warmup", "probe"] and "re-warm" in roles, roles
    whys = [e["why"] for e in doc["extra_sizes"]]
    assert any("moving steps" in w for w in whys) and any("moving height" in w for w in whys)
    assert len(roles) == 3 + len(whys) and 0 < doc["extra_cost"] < BUDGET  # half a request
    assert doc["verdict"]["holds"] and doc["verdict"]["exit_status"] == 0
    labels = [p["label"] for p in doc["phases"]]
    assert {"stage:TextEncodingStage", "stage:DenoisingStage", "stage:DecodingStage"} <= set(labels)
    for entry in [*doc["phases"], doc["request"]]:
        measured, predicted, bound = (
            entry["measured_peak_bytes"],
            entry["predicted_peak_bytes"],
            entry["bound_peak_bytes"],
        )
        assert measured is not None and predicted <= bound
        assert abs(predicted - measured) <= 0.05 * measured, entry  # the raw estimate within 5 %
        assert bound >= measured, entry  # the bound never below what the target needed
    request = doc["request"]
    assert request["predicted_ms"] > 0 and request["measured_ms"] > 0
    assert [s["stage"] for s in doc["stages"]] == [
        "TextEncodingStage",
        "DenoisingStage",
        "DecodingStage",
    ]
    # 2 transformer calls a step (CFG) x 8 steps: ceil(4 calls x 8 / 2 measured iterations) = 16.
    assert {(u["layer"], u["calls"]) for u in doc["layer_uses"]} == {
        ("blocks.0", 16),
        ("blocks.1", 16),
    }
    assert plot.read_bytes().startswith(b"\x89PNG")
    saved = [dict(r.params) for r in load_records(records)]  # the sizes in order, then the target
    assert saved == [*(r["params"] for r in doc["records"]), doc["target"]]


@pytest.mark.slow
def test_flux_tables_without_verify():
    result = invoke(
        "--example",
        "flux",
        "--repeat",
        "1",
        "--target",
        "steps=4,height=96,width=96",
        "--probe",
        "height=64",
        "--probe",
        "width=64",
        "--warmup",
        "height=32,width=32",
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("calibrating flux1_dev (example flux, formulas ")
    assert "target steps=4,height=96,width=96,cfg=false, as asked" in out.splitlines()[0]
    assert "target:  steps=4, height=96, width=96, cfg=false" in out
    assert "stage:DenoisingStage" in out and "run with --verify" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target", "frames=18"], "target: "),
        (["--probe", "nope=1"], "probe: "),
    ],
)
def test_inadmissible_or_unknown_points_exit_1(args, message):
    result = invoke(*args)
    assert result.exit_code == 1
    assert message in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["--probe", "steps"],
        ["--target", "steps=x"],
        ["--probe", "steps=1,steps=2"],
        ["--margin", "0.5"],
        ["--example", "nope"],
    ],
)
def test_usage_errors_exit_2(args):
    assert invoke(*args).exit_code == 2


def test_a_missing_formulas_folder_exits_1(tmp_path):
    result = invoke("--formulas", str(tmp_path))
    assert result.exit_code == 1 and "no formula file" in result.stderr


def test_extra_probes_close_the_decoding_terms_the_warmup_and_probe_leave_open():
    from pathlib import Path

    from calibration.calibrate.run import load_pipeline
    from calibration.probes.sizes import extra_probes

    wan = load_pipeline(
        Path(__file__).resolve().parents[3] / "formulas" / "wan.wf", "wan2_1_t2v_1_3b"
    )
    base = {"steps": 2, "cfg": True}
    warmup = {**base, "frames": 17, "height": 32, "width": 32}
    probe = {**base, "frames": 9, "height": 64, "width": 64}
    target = {**base, "steps": 8, "frames": 33, "height": 64, "width": 64}
    # Same frames: the frames term moves with the area term, the target is determined.
    assert extra_probes(wan, warmup, {**probe, "frames": 33}, target) == []
    # Area and frames both differ: the cheapest corner of the warmup-probe box that closes the
    # plane is the warmup at the probe's frames (rows (1, 1024, 3072) beside (1, 1024, 5120) and
    # (1, 4096, 12288) are independent).
    assert extra_probes(wan, warmup, probe, target) == [
        {**base, "frames": 9, "height": 32, "width": 32}
    ]


@pytest.mark.slow
def test_calibrate_adds_an_extra_probe_and_fits_the_decoding_plane():
    result = invoke(
        "--verify",
        "--json",
        "--repeat",
        "1",
        "--probe",
        "frames=9",
        "--target",
        "steps=8,frames=33,height=64,width=64",
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["extra_probes"][0] == {
        "steps": 2,
        "frames": 9,
        "height": 32,
        "width": 32,
        "cfg": True,
    }
    assert [r["role"] for r in doc["records"]][:3] == ["warmup", "probe", "probe 2"]
    decoding = next(p for p in doc["phases"] if p["label"] == "stage:DecodingStage")
    assert decoding["method"] == "fit" and "term 2" in decoding["reason"]
    assert (
        abs(decoding["error"]) <= 0.05
        and decoding["bound_peak_bytes"] >= decoding["measured_peak_bytes"]
    )


CUSTOM = "tests/calibration/custom_pipeline.py:build"
CUSTOM_NAME = "custom_sd"


@pytest.mark.slow
def test_your_own_pipeline_from_a_factory_and_a_formula_file(tmp_path):
    # A pipeline that is not a built-in example: its factory, its own formula file, --name.
    root = Path(__file__).resolve().parents[3]
    saved = tmp_path / "calibration.json"
    result = CliRunner().invoke(
        calibrate,
        [
            "--pipeline",
            str(root / CUSTOM),
            "--formulas",
            str(root / "tests/calibration/data/custom_sd.wf"),
            "--name",
            CUSTOM_NAME,
            "--probe",
            "steps=2,height=32,width=32",
            "--target",
            "steps=6,height=64,width=64",
            "--verify",
            "--repeat",
            "1",
            "--save",
            str(saved),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(saved.read_text())
    assert doc["pipeline"] == CUSTOM_NAME and doc["verified"]
    assert doc["undeclared_components"] == []
    labels = {p["label"] for p in doc["phases"]}
    assert {"stage:TextEncodingStage", "stage:DenoisingStage", "stage:DecodingStage"} <= labels
    for entry in [*doc["phases"], doc["request"]]:
        if entry["measured_peak_bytes"] is None:
            continue
        assert entry["bound_peak_bytes"] >= entry["measured_peak_bytes"], entry
    assert doc["layer_bytes"]["unet"] and all(b > 0 for b in doc["layer_bytes"]["unet"].values())
    # The saved calibration is the planner's input: plan it on a device that holds it all.
    from calibration.cli.plan import plan

    planned = CliRunner().invoke(
        plan, ["--calibration", str(saved), "--device-memory", "4GiB", "--reserve", "0", "--json"]
    )
    assert planned.exit_code == 0, planned.output
    placements = json.loads(planned.stdout)
    assert "unet" in json.dumps(placements)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--pipeline", "nope", "--name", "x"], "expected MODULE:FACTORY"),
        (["--pipeline", "no/such/file.py:build", "--name", "x"], "no file"),
    ],
)
def test_pipeline_usage_problems_exit_1(args, message):
    result = invoke(*args)
    assert result.exit_code == 1 and message in result.stderr, result.output


def test_pipeline_without_name_is_a_usage_error_unless_the_file_holds_one():
    """Exit 2 before anything is built when the formulas hold several pipelines; the only one's
    name otherwise."""
    from calibration.cli.options import Choice, check_choice

    result = invoke("--pipeline", "json:dumps")
    assert result.exit_code == 2 and "needs --name" in result.output, result.output
    assert "wan2_1_t2v_1_3b" in result.output  # the pipelines it could have been
    one = Path(__file__).resolve().parents[1] / "data" / "custom_sd.wf"
    chosen = check_choice(Choice("wan", "x.py:build", one, None))
    assert chosen.name == "custom_sd"
