"""`dslc plan` through click's CliRunner, and the calibration inputs it reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.cli.plan import plan
from calibration.plan import Device, GiB, solve
from calibration.plan.inputs import (
    CalibrationFormatError,
    from_calibration,
    from_estimate,
    load_calibration,
)
from calibration.plan.report import parse_size
from runtime.estimate.results import (
    LayerUseEstimate,
    PeakEstimate,
    PhaseEstimate,
    TimingEstimate,
    WorkloadEstimate,
)

WEIGHTS = {"text_encoder": 9 * GiB, "transformer": 24 * GiB, "vae": GiB // 4}
LAYERS = {"transformer": {f"blocks.{i}": GiB // 2 for i in range(40)}}


def calibration_document(bound_denoise: int = 40 * GiB, steps: int = 50) -> dict:
    """What `dslc calibrate --json` prints plus the weights the planner needs (docs/planning.md)."""
    weights = sum(WEIGHTS.values())  # on the device while the calibration measured
    return {
        "version": 1,
        "pipeline": "flux1_dev",
        "target": {"steps": steps, "height": 1024, "width": 1024},
        "phases": [
            {
                "label": "stage:TextEncodingStage",
                "stage": "TextEncodingStage",
                "active_components": ["text_encoder"],
                "bound_peak_bytes": weights + GiB,
            },
            {
                "label": "stage:DenoisingStage",
                "stage": "DenoisingStage",
                "active_components": ["transformer"],
                "bound_peak_bytes": weights + bound_denoise - 40 * GiB + 3 * GiB,
            },
            {
                "label": "stage:DecodingStage",
                "stage": "DecodingStage",
                "active_components": ["vae"],
                "bound_peak_bytes": weights + 6 * GiB,
            },
        ],
        "layer_uses": [
            {
                "component": "transformer",
                "layer": f"blocks.{i}",
                "stage": "DenoisingStage",
                "calls": steps,
                "measured_calls": 2,
                "method": "scaled",
            }
            for i in range(40)
        ],
        "component_weight_bytes": WEIGHTS,
        "layer_bytes": LAYERS,
    }


def _write(tmp_path: Path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_the_document_gives_components_and_a_target():
    cal = load_calibration(calibration_document())
    transformer = {c.name: c for c in cal.components}["transformer"]
    assert transformer.layer_names[0] == "blocks.0" and len(transformer.layer_bytes) == 40
    bounds = {p.label: p.bound_bytes for p in cal.target.phases}
    assert bounds == {
        "stage:TextEncodingStage": GiB,  # the weights measured with it are taken out
        "stage:DenoisingStage": 3 * GiB,
        "stage:DecodingStage": 6 * GiB,
    }
    assert cal.target.name == "steps=50,height=1024,width=1024"
    assert cal.target.uses == {"text_encoder": 1, "transformer": 1, "vae": 1}
    assert cal.target.layer_uses["transformer"] == (50,) * 40


def test_from_estimate_matches_the_document():
    doc = calibration_document()
    none_time = TimingEstimate("none", None, "not needed")
    phases = tuple(
        PhaseEstimate(
            p["label"],
            "stage",
            p["stage"],
            p["stage"],
            tuple(p["active_components"]),
            tuple(p["active_components"]),
            PeakEstimate("fit", p["bound_peak_bytes"], p["bound_peak_bytes"], 1.2, "r"),
        )
        for p in doc["phases"]
    )
    uses = tuple(
        LayerUseEstimate("transformer", f"blocks.{i}", "DenoisingStage", 50, 2, "scaled", "r")
        for i in range(40)
    )
    estimate = WorkloadEstimate(
        "flux1_dev", doc["target"], 1.2, phases, phases[1].peak, none_time, uses, (), 3, 0
    )
    cal = load_calibration(doc)
    assert from_estimate(estimate, cal.components) == cal.target


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"phases": []}, "missing key 'version'"),
        ({"version": 1, "phases": []}, "missing key 'component_weight_bytes'"),
        ({"version": 1, "component_weight_bytes": {"a": -1}, "phases": []}, "int >= 0"),
        (
            {
                "version": 1,
                "component_weight_bytes": {"a": 1},
                "phases": [{"label": "p", "bound_peak_bytes": None}],
            },
            "has no estimate",
        ),
        (
            {"version": 1, "component_weight_bytes": {"a": 1}, "phases": [{"bound_peak_bytes": 3}]},
            r"phases\[0\]: missing key 'label'",
        ),
        (
            {
                "version": 1,
                "component_weight_bytes": {"a": 1},
                "layer_bytes": {"b": {}},
                "phases": [],
            },
            "unknown",
        ),
    ],
)
def test_bad_documents_are_typed_errors(doc, message):
    with pytest.raises(CalibrationFormatError, match=message):
        load_calibration(doc)


def test_a_file_that_is_not_json(tmp_path):
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(CalibrationFormatError, match="not JSON"):
        load_calibration(tmp_path / "bad.json")


def test_sizes():
    assert parse_size("80GiB") == 80 * GiB
    assert parse_size("1.5 GB") == 1_500_000_000
    assert parse_size("25GB/s", per_second=True) == 25 * 10**9
    with pytest.raises(ValueError, match="not a size"):
        parse_size("80 parsecs")


def test_cli_plans_a_saved_calibration(tmp_path):
    path = _write(tmp_path, "cal.json", calibration_document())
    result = CliRunner().invoke(plan, ["--calibration", path, "--device-memory", "24GiB", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    by_name = {c["name"]: c for c in doc["components"]}
    assert doc["version"] == 1 and doc["feasible"] and doc["device"]["reserve_bytes"] == GiB
    # streaming a transformer layer costs 50 calls; the text encoder and VAE run once: offload them
    assert by_name["vae"]["placement"] == by_name["text_encoder"]["placement"] == "offloaded"
    transformer = by_name["transformer"]
    assert transformer["placement"] == "layerwise"
    assert transformer["resident_layer_names"][0] == "blocks.0"
    expected = solve(*_inputs(path), Device(24 * GiB))
    assert doc["transfer_bytes"] == expected.transfer_bytes
    assert all(p["headroom_bytes"] >= 0 for p in doc["phases"])


def _inputs(path):
    from calibration.cli.plan import inputs

    components, targets = inputs([load_calibration(Path(path))])
    return components, targets


def test_cli_table_and_exit_codes(tmp_path):
    path = _write(tmp_path, "cal.json", calibration_document())
    runner = CliRunner()
    table = runner.invoke(plan, ["--calibration", path, "--device-memory", "80GiB"])
    assert table.exit_code == 0 and "resident" in table.output and "headroom" in table.output
    tiny = runner.invoke(plan, ["--calibration", path, "--device-memory", "4GiB"])
    assert tiny.exit_code == 1 and "nothing fits" in tiny.output
    # the phase and the bytes missing: the text encoder (9 GiB, not layerwise) and 1 GiB of
    # activations in 3 GiB usable
    assert "stage:TextEncodingStage needs 7 GiB more" in tiny.output
    both = runner.invoke(plan, ["--calibration", path])
    assert both.exit_code == 2 and "--device-memory" in both.output
    bad = runner.invoke(plan, ["--calibration", path, "--device-memory", "lots"])
    assert bad.exit_code == 2 and "not a size" in bad.output
    missing = runner.invoke(
        plan, ["--calibration", str(tmp_path / "nope.json"), "--device-memory", "8GiB"]
    )
    assert missing.exit_code == 1 and "error:" in missing.output


def test_cli_merges_ranks_and_plans_target_sets(tmp_path):
    rank0 = _write(tmp_path, "r0.json", calibration_document(bound_denoise=40 * GiB))
    rank1 = _write(tmp_path, "r1.json", calibration_document(bound_denoise=44 * GiB))
    largest = _write(tmp_path, "big.json", calibration_document(steps=20, bound_denoise=46 * GiB))
    runner = CliRunner()
    args = ["--device-memory", "24GiB", "--json"]
    one = json.loads(runner.invoke(plan, ["--calibration", rank0, *args]).output)
    ranks = json.loads(
        runner.invoke(plan, ["--calibration", rank0, "--calibration", rank1, *args]).output
    )
    assert {p["target"] for p in ranks["phases"]} == {"steps=50,height=1024,width=1024"}
    denoise = [p for p in ranks["phases"] if p["label"] == "stage:DenoisingStage"]
    assert denoise[0]["bound_bytes"] == 7 * GiB  # the cautious rank's
    assert ranks["transfer_bytes"] >= one["transfer_bytes"]
    both = json.loads(
        runner.invoke(plan, ["--calibration", rank0, "--calibration", largest, *args]).output
    )
    assert len({p["target"] for p in both["phases"]}) == 2


TINY_FLUX = ["--example", "flux", "--probe", "steps=1,height=32,width=32"]
TINY_RUN = ["--repeat", "1", "--no-time-probe"]  # the runs then depend on the formulas alone
SHAPES = ["steps=2,height=64,width=64", "steps=3,height=64,width=64"]


@pytest.mark.slow
def test_cli_runs_the_calibrations_itself_as_calibrate_would_save_them(tmp_path):
    from calibration.cli.calibrate import calibrate

    runner = CliRunner()
    device = ["--device-memory", "1MiB", "--reserve", "0", "--json"]
    targets = [arg for shape in SHAPES for arg in ("--target", shape)]
    ran = runner.invoke(plan, [*TINY_FLUX, *targets, *TINY_RUN, *device], catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    saved = []
    for k, shape in enumerate(SHAPES):
        path = tmp_path / f"cal{k}.json"
        args = [*TINY_FLUX, "--target", shape, *TINY_RUN, "--save", str(path)]
        assert runner.invoke(calibrate, args).exit_code == 0
        saved += ["--calibration", str(path)]
    from_files = runner.invoke(plan, [*saved, *device])
    assert from_files.exit_code == 0, from_files.output
    doc, saved_doc = json.loads(ran.stdout), json.loads(from_files.stdout)
    # the compute times are measured (wall clock): each run its own, in the same places
    times = [[t.pop("predicted_s"), t.pop("compute_s")] for t in doc["times"]]
    saved_times = [[t.pop("predicted_s"), t.pop("compute_s")] for t in saved_doc["times"]]
    stages = [sorted(t.pop("stages_s")) for t in doc["times"]]
    assert stages == [sorted(t.pop("stages_s")) for t in saved_doc["times"]]
    assert stages[0] == ["DecodingStage", "DenoisingStage", "TextEncodingStage"]
    assert all(s > 0 for pair in times + saved_times for s in pair)
    assert doc.pop("predicted_s") == pytest.approx(sum(s for s, _ in times))
    saved_doc.pop("predicted_s")
    assert doc == saved_doc  # running one is planning what it would save
    assert doc["feasible"] and {p["target"] for p in doc["phases"]} == {
        f"{shape},cfg=false" for shape in SHAPES
    }
    placements = {c["name"]: c["placement"] for c in doc["components"]}
    assert set(placements.values()) != {"resident"}  # 1 MiB is too small to keep everything


@pytest.mark.parametrize(
    "args, message",
    [
        (["--calibration", "cal.json", "--example", "flux"], "--example), not both"),
        (["--calibration", "cal.json", "--target", "steps=2"], "--target), not both"),
        (["--target", "steps=x"], "--target"),
        (["--example", "nope"], "--example"),
    ],
)
def test_cli_calibration_options_usage_errors_exit_2(args, message):
    result = CliRunner().invoke(plan, [*args, "--device-memory", "1GiB"])
    assert result.exit_code == 2 and message in result.output, result.output


def test_cli_reports_a_usage_error_without_running_it():
    result = CliRunner().invoke(plan, ["--pipeline", "json:dumps", "--device-memory", "2GiB"])
    assert result.exit_code == 2 and "needs --name" in result.output, result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--device-memory", "24"], "has no unit"),
        (["--device-memory", "4MiB"], "leaves nothing of 4 MiB"),
        (["--device-memory", "8GiB", "--reserve", "8GiB"], "leaves nothing"),
        (["--device-memory", "8GiB", "--bandwidth", "12"], "has no unit"),
    ],
)
def test_cli_device_checks_come_before_any_calibration(args, message):
    """Exit 2 at once (no pipeline is built: the example below would take seconds)."""
    result = CliRunner().invoke(plan, ["--example", "flux", *args])
    assert result.exit_code == 2 and message in result.output, result.output


def uneven_document(n: int = 120, layers: int = 30) -> dict:
    """A calibration of ``n`` components of uneven layers with uneven uses, one phase each
    (bench/plan.py's hostile shape): past the search's work limit before it proves its best."""
    import random

    rng = random.Random(23)
    MiB = 1 << 20
    sizes = {f"c{i}": [rng.randint(1, 64) * MiB for _ in range(layers)] for i in range(n)}
    weights = {c: sum(s) + rng.randint(0, 64) * MiB for c, s in sizes.items()}
    total = sum(weights.values())
    return {
        "version": 1,
        "pipeline": "hostile",
        "target": {"steps": 1},
        "phases": [
            {
                "label": f"stage:S{i}",
                "stage": f"S{i}",
                "active_components": [f"c{i}"],
                "bound_peak_bytes": total + rng.randint(0, 8) * GiB,
            }
            for i in range(n)
        ],
        "layer_uses": [
            {
                "component": f"c{i}",
                "layer": f"l{k}",
                "stage": f"S{i}",
                "calls": rng.randint(1, 100),
                "measured_calls": 1,
                "method": "scaled",
            }
            for i in range(n)
            for k in range(layers)
        ],
        "component_weight_bytes": weights,
        "layer_bytes": {c: {f"l{k}": b for k, b in enumerate(s)} for c, s in sizes.items()},
    }


def test_cli_says_a_plan_found_at_the_search_limit_is_not_proven_the_least(tmp_path):
    """Past the search's work limit with a placement that fits, `dslc plan` prints it (exit 0)
    with a line and a warning naming the limit; --json says `proven: false`."""
    path = _write(tmp_path, "cal.json", uneven_document())
    runner = CliRunner()
    args = ["--calibration", path, "--device-memory", "40GiB"]
    doc = json.loads(runner.invoke(plan, [*args, "--json"]).output)
    assert doc["feasible"] is True and doc["proven"] is False
    assert doc["stopped_by"] == "MAX_SEARCH_WORK"
    assert 0 < doc["lower_bound_bytes"] <= doc["transfer_bytes"]
    assert all(p["headroom_bytes"] >= 0 for p in doc["phases"])
    table = runner.invoke(plan, args)
    assert table.exit_code == 0, table.output
    assert "not proven the least" in table.output and "MAX_SEARCH_WORK" in table.output
    assert "warning[plan-unproven]" in table.output


@pytest.mark.slow
def test_a_calibration_is_planned_in_memory_as_its_saved_document_reads(flux) -> None:
    """`dslc plan` without --calibration hands the planner the calibration itself: the same
    components, bounds, layer calls and target as its saved document, compute to the document's
    rounding (a microsecond)."""
    from calibration.calibrate.pipeline import calibrate_pipeline
    from calibration.calibrate.report import document
    from calibration.examples import EXAMPLES

    example = EXAMPLES["flux"]
    cal = calibrate_pipeline(
        example.build, flux, example.shapes, call_kwargs=example.call_kwargs,
        target={"steps": 2, "height": 64, "width": 64}, repeat=1, time_tolerance=None,
    )  # fmt: skip
    memory, saved = from_calibration(cal), load_calibration(document(cal))
    assert memory.components == saved.components
    got, want = memory.target, saved.target
    assert (got.name, got.phases, got.uses, got.layer_uses) == (
        want.name, want.phases, want.uses, want.layer_uses,
    )  # fmt: skip
    assert got.phases and any(p.bound_bytes > 0 for p in got.phases)
    assert got.compute_s == pytest.approx(want.compute_s, abs=1e-6)
    assert set(got.stage_seconds) == set(want.stage_seconds)
    for stage, seconds in got.stage_seconds.items():
        assert seconds == pytest.approx(want.stage_seconds[stage], abs=1e-6)


def test_cli_host_memory_bounds_the_host_copies_and_names_the_shortfall(tmp_path):
    path = _write(tmp_path, "cal.json", calibration_document())
    runner = CliRunner()
    args = ["--calibration", path, "--device-memory", "24GiB", "--json"]
    free = json.loads(runner.invoke(plan, args).output)
    assert free["device"]["host_memory_bytes"] is None and free["host_bytes"] > 0
    enough = f"{free['host_bytes']}B"
    held = json.loads(runner.invoke(plan, [*args, "--host-memory", enough]).output)
    assert held["feasible"] and held["device"]["host_memory_bytes"] == free["host_bytes"]
    short = runner.invoke(plan, [*args, "--host-memory", "1MiB"])
    assert short.exit_code == 1
    doc = json.loads(short.output)
    assert doc["shortfall"] == "host" and doc["reason"].startswith("host memory 1 MiB is ")
    bare = runner.invoke(plan, [*args, "--host-memory", "24"])
    assert bare.exit_code == 2
