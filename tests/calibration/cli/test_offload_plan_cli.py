"""`--calibrate-offload plan:FILE`: `dslc plan --json` saved to a file, then `dslc calibrate`,
`dslc plan` and `dslc infer` calibrating under it (the tiny FLUX on the CPU, and a pipeline larger
than its capped device), and every bad plan file or option a clean exit 1 or 2 naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dslc.cli import cli
from tests.calibration.cli.runs import DATA, SMALL_FLUX, TOWERS_CAP, TWO_TOWERS

pytest.importorskip("accelerate")


def _dslc(*args: str):
    """One `dslc` command through its group (an exit 3 for a bug included)."""
    return CliRunner().invoke(cli, list(args))


def _saved(tmp_path_factory, name: str, *args: str) -> Path:
    result = _dslc("plan", *args, "--reserve", "0", "--json")
    assert result.exit_code == 0, result.output
    path = tmp_path_factory.mktemp("plans") / name
    path.write_text(result.stdout)
    return path


@pytest.fixture(scope="module")
def flux_plan(tmp_path_factory) -> Path:
    """The tiny FLUX planned for 1 MiB: the VAE resident, the text encoders offloaded, one of the
    transformer's two blocks streamed."""
    return _saved(tmp_path_factory, "flux.json", *SMALL_FLUX, "--device-memory", "1MiB")


def _calibrated(*args: str) -> dict:
    result = _dslc("calibrate", *args, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert all(r["ok"] for r in doc["records"]), doc["records"]
    return doc


def test_calibrates_flux_under_its_saved_plan(flux_plan):
    plan = json.loads(flux_plan.read_text())
    under = _calibrated(
        *SMALL_FLUX, "--device-capacity", "1MiB", "--calibrate-offload", f"plan:{flux_plan}"
    )
    free = _calibrated(*SMALL_FLUX)  # no cap, no offload: every weight on the device
    placement = {c["name"]: c["placement"] for c in plan["components"]}
    assert under["calibrated_under"] == {
        "offload": "plan",
        "capacity_bytes": 1 << 20,
        "plan_file": str(flux_plan),
        "placement": {**placement, "transformer": "layerwise 1/2"},
    }
    assert free["calibrated_under"] == {"offload": "none", "capacity_bytes": None}
    weights = under["component_weight_bytes"]
    vae = weights["vae"]  # the only resident component
    held = {
        "component:text_encoder@TextEncodingStage": vae + weights["text_encoder"],
        "component:text_encoder_2@TextEncodingStage": vae + weights["text_encoder_2"],
        "component:transformer@DenoisingStage": vae + weights["transformer"],
        "stage:DecodingStage": vae,
    }
    phases = {p["label"]: p for p in under["phases"]}
    for label, weights_bytes in held.items():  # one offloaded component at a time, beside the VAE
        assert phases[label]["weights_bytes"] == weights_bytes, label
    assert all(p["bound_peak_bytes"] <= 1 << 20 for p in under["phases"])
    for p in free["phases"]:  # the activations: the CPU tracker is exact, whatever the placement
        q = phases[p["label"]]
        assert p["weights_bytes"] == sum(weights.values())
        assert q["bound_peak_bytes"] - q["weights_bytes"] == (
            p["bound_peak_bytes"] - p["weights_bytes"]
        ), p["label"]


def test_plans_again_under_a_saved_plan(flux_plan):
    result = _dslc(
        "plan", *SMALL_FLUX, "--device-memory", "1MiB", "--reserve", "0", "--json",
        "--calibrate-offload", f"plan:{flux_plan}",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    again = json.loads(result.stdout)
    first = json.loads(flux_plan.read_text())
    assert [c["placement"] for c in again["components"]] == [
        c["placement"] for c in first["components"]
    ]


def test_infer_measures_its_ladder_under_a_saved_plan(flux_plan):
    skeleton = str(DATA / "skeletons" / "flux.wf")
    args = ["--example", "flux", "--params", skeleton, "--calibrate-offload", f"plan:{flux_plan}"]
    result = _dslc("infer", *args)
    assert result.exit_code == 0, result.output
    assert "stage DenoisingStage uses transformer per step" in result.stdout


def test_a_pipeline_larger_than_the_cap_calibrates_under_its_saved_plan(tmp_path_factory):
    saved = _saved(tmp_path_factory, "towers.json", *TWO_TOWERS, "--device-memory", "640KiB")
    doc = _calibrated(*TWO_TOWERS, "--calibrate-offload", f"plan:{saved}")
    weights = doc["component_weight_bytes"]
    assert sum(weights.values()) > TOWERS_CAP
    assert doc["calibrated_under"]["offload"] == "plan"
    assert doc["calibrated_under"]["placement"]["text_tower"] == "offloaded"
    phases = {p["label"]: p for p in doc["phases"]}
    text = phases["stage:TextEncodingStage"]
    assert text["weights_bytes"] <= TOWERS_CAP and text["weights_bytes"] >= weights["text_tower"]
    assert all(p["bound_peak_bytes"] <= TOWERS_CAP for p in doc["phases"])


def _mutated(source: Path, tmp_path: Path, edit) -> Path:
    doc = json.loads(source.read_text())
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


def _written(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    return path


HOSTILE = {
    "too large": (lambda t, p: _written(t, b'{"a": "' + b"x" * (16 << 20) + b'"}'), "over 16,77"),
    "not JSON": (lambda t, p: _written(t, b"{nope"), "not JSON"),
    "a repeated key": (lambda t, p: _written(t, b'{"version": 1, "version": 1}'), "duplicate key"),
    "a wrong type": (
        lambda t, p: _mutated(p, t, lambda d: d["components"][0].update(layers="two")),
        "components[0].layers: expected integer, got string 'two'",
    ),
    "an unknown component": (
        lambda t, p: _mutated(p, t, lambda d: d["components"][0].update(name="unet")),
        "components[0].name: the pipeline has no component 'unet'",
    ),
    "an unknown placement": (
        lambda t, p: _mutated(p, t, lambda d: d["components"][1].update(placement="sideways")),
        "components[1].placement: 'sideways' is not one of 'resident', 'offloaded', 'layerwise'",
    ),
    "a missing file": (lambda t, p: t / "missing.json", "No such file or directory"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_bad_plan_file_is_exit_1_naming_the_file(flux_plan, tmp_path, case):
    make, message = HOSTILE[case]
    path = make(tmp_path, flux_plan)
    result = _dslc("calibrate", *SMALL_FLUX, "--calibrate-offload", f"plan:{path}")
    assert result.exit_code == 1, result.output
    assert f"error: plan file {path}" in result.stderr and message in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["calibrate", "plan", "infer"])
def test_every_command_reads_the_plan_file_before_it_runs(tmp_path, command):
    args = {
        "calibrate": SMALL_FLUX,
        "plan": [*SMALL_FLUX, "--device-memory", "1MiB", "--reserve", "0"],
        "infer": ["--example", "flux", "--params", str(DATA / "skeletons" / "flux.wf")],
    }[command]
    path = _written(tmp_path, b"[]")
    result = _dslc(command, *args, "--calibrate-offload", f"plan:{path}")
    assert result.exit_code == 1, result.output
    assert f"plan file {path}: a plan document is a JSON object" in result.stderr


def _integral_floats(doc: dict) -> None:
    """The streamed component's kept layer indices as ``1.0``: JSON Schema counts them integers."""
    streamed = next(c for c in doc["components"] if c["placement"] == "layerwise")
    streamed["resident_layers"] = [float(i) for i in streamed["resident_layers"]]


@pytest.mark.parametrize("command", ["calibrate", "plan", "infer"])
def test_an_integral_float_is_refused_by_every_reader_naming_its_place(
    flux_plan, tmp_path, command
):
    args = {
        "calibrate": SMALL_FLUX,
        "plan": [*SMALL_FLUX, "--device-memory", "1MiB", "--reserve", "0"],
        "infer": ["--example", "flux", "--params", str(DATA / "skeletons" / "flux.wf")],
    }[command]
    path = _mutated(flux_plan, tmp_path, _integral_floats)
    result = _dslc(command, *args, "--calibrate-offload", f"plan:{path}")
    assert result.exit_code == 1, result.output
    assert f"plan file {path}: components[" in result.stderr
    assert "].resident_layers[0]: expected integer, got number 0.0" in result.stderr


@pytest.mark.parametrize(
    ("value", "status", "message"),
    [
        ("plan:", 2, "plan needs the plan's file: plan:FILE"),
        ("plan", 2, "plan needs the plan's file: plan:FILE"),
        ("sideways", 2, "'sideways' is not one of auto, none, model, group, plan:FILE"),
        ("plan:" + "x" * 5000, 2, "a plan file's path of 5,000 characters; at most 4,096"),
        ("plan:/nonexistent", 1, "plan file /nonexistent: No such file or directory"),
    ],
)
def test_the_option_parser(value, status, message):
    result = _dslc("calibrate", *SMALL_FLUX, "--calibrate-offload", value)
    assert result.exit_code == status, result.output
    assert message in result.output


def _failing_vae_moves(monkeypatch, fails) -> None:
    """The tiny FLUX's VAE class's ``.to()`` raises a RuntimeError on the calls ``fails(n)``."""
    from diffusers import AutoencoderKL

    real, calls = AutoencoderKL.to, [0]

    def to(self, *args, **kwargs):
        calls[0] += 1
        if fails(calls[0]):
            raise RuntimeError("CUDA error: an illegal memory access was encountered (injected)")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(AutoencoderKL, "to", to)


def test_a_move_that_fails_under_a_saved_plan_is_a_typed_error(flux_plan, monkeypatch):
    _failing_vae_moves(monkeypatch, lambda n: n == 1)  # the plan's move of the resident VAE
    result = _dslc(
        "calibrate", *SMALL_FLUX, "--device-capacity", "1MiB", "--calibrate-offload",
        f"plan:{flux_plan}",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "moving vae failed: RuntimeError" in result.stderr
    assert "Traceback" not in result.stderr


def _stuck_text_encoder_hooks(monkeypatch) -> None:
    """The tiny FLUX's CLIP text encoder keeps its offloading hook: taking it off raises (a
    third-party hook that fails to come off; on the CPU no move can fail an undo, since a
    component the plan offloads stays on the one memory)."""
    from transformers import CLIPTextModel

    from calibration.placement.mechanisms import ModelOffload, has_offload_hooks

    real = ModelOffload.remove

    def remove(self, module):
        if isinstance(module, CLIPTextModel) and has_offload_hooks(module):
            raise RuntimeError("the hook would not come off (injected)")
        return real(self, module)

    monkeypatch.setattr(ModelOffload, "remove", remove)


def test_a_final_undo_that_fails_keeps_the_saved_calibration(flux_plan, monkeypatch, tmp_path):
    _stuck_text_encoder_hooks(monkeypatch)  # applied, then not taken off again
    save = tmp_path / "cal.json"
    result = _dslc(
        "calibrate", *SMALL_FLUX, "--device-capacity", "1MiB", "--calibrate-offload",
        f"plan:{flux_plan}", "--save", str(save),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert json.loads(save.read_text())["phases"]  # the measurement is kept
    assert "left in place: text_encoder: offloading hooks" in result.stderr
    assert "Traceback" not in result.stderr
    validated = _dslc(
        "plan", *SMALL_FLUX, "--device-memory", "1MiB", "--reserve", "0", "--validate",
        "--calibrate-offload", f"plan:{flux_plan}",
    )  # fmt: skip
    assert validated.exit_code == 5, validated.output  # a rollback that failed: not serving
    assert "ROLLBACK FAILED" in validated.stdout and "Traceback" not in validated.stderr


@pytest.mark.parametrize("error", [KeyError, MemoryError, AssertionError])
def test_any_error_of_a_move_under_model_offload_is_a_typed_error_with_no_hook_left(
    monkeypatch, error
):
    """issue 39 item 3 variant: only ImportError, ValueError, RuntimeError and AttributeError
    of diffusers' model offload were typed; a KeyError or a MemoryError of a component's
    ``.to()`` exited 3 and left the hooks it had installed."""
    from diffusers import AutoencoderKL

    from calibration.core.offload import Offload, placed
    from calibration.errors import CalibrationError
    from calibration.examples import EXAMPLES
    from calibration.placement.mechanisms import has_offload_hooks
    from runtime.measure.diffusers_hooks import pipeline_modules

    def to(self, *args, **kwargs):
        raise error("a move that fails (injected)")

    monkeypatch.setattr(AutoencoderKL, "to", to)
    result = _dslc("calibrate", *SMALL_FLUX, "--calibrate-offload", "model")
    assert result.exit_code == 1, result.output
    assert f"model CPU offload failed on FluxPipeline: {error.__name__}" in result.stderr
    assert "Traceback" not in result.stderr
    pipe = EXAMPLES["flux"].build(0)
    with pytest.raises(CalibrationError, match=error.__name__):
        placed(pipe, Offload.MODEL, "cpu", None)
    assert not [n for n, m in pipeline_modules(pipe).items() if has_offload_hooks(m)]
