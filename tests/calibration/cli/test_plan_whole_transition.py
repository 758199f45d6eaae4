"""The planner's full-weight and transition inputs, made by a calibration and `dslc plan` (issue
39, item 8): each phase where an active component may stream carries a transition (its bound and
the largest layer of that component, held while the next one arrives), which the planner then
respects; ``--whole STAGE=COMPONENT`` counts the component whole in that stage's phases."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from calibration.calibrate.report import document
from calibration.cli.plan import plan
from calibration.plan import Device, GiB, PlacementKind, solve
from calibration.plan.inputs import UnknownWholeError, from_calibration, load_calibration
from calibration.plan.model import Target
from tests.calibration.cli.test_plan import calibration_document
from tests.calibration.lifecycle_setup import calibration

pytest.importorskip("accelerate")

DENOISE = "stage:DenoisingStage"
#: The tiny FLUX's transformer: two layers of 151,552 and 62,976 B, 326,656 B in all.
LARGEST, TRANSFORMER = 151_552, 326_656


def _phases(target: Target) -> dict:
    return {p.label: p for p in target.phases}


def _plan_json(tmp_path: Path, doc: dict, *args: str) -> tuple[int, dict | str]:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    argv = ["--calibration", str(path), "--reserve", "0", "--json", *args]
    result = CliRunner().invoke(plan, argv)
    if result.exit_code in (0, 1) and result.stdout.startswith("{"):
        return result.exit_code, json.loads(result.stdout)
    return result.exit_code, result.output


def test_a_calibrations_phases_carry_the_largest_streamed_layer_as_their_transition():
    phases = _phases(load_calibration(calibration_document()).target)
    denoise = phases[DENOISE]
    assert denoise.transition_bytes == denoise.bound_bytes + GiB // 2  # one 0.5 GiB block more
    assert phases["stage:TextEncodingStage"].transition_bytes is None  # no layers: no stream
    assert phases["stage:DecodingStage"].transition_bytes is None
    measured = _phases(from_calibration(calibration()).target)  # the tiny FLUX, measured
    for label in (DENOISE, "component:transformer@DenoisingStage"):
        assert measured[label].transition_bytes == measured[label].bound_bytes + LARGEST
    assert measured["stage:DecodingStage"].transition_bytes is None


def test_where_the_steady_state_fits_and_the_arrival_does_not_nothing_streams(tmp_path):
    """At 14 GiB the transformer fits streamed (4 GiB kept, a 0.5 GiB block, a 9.25 GiB bound:
    13.75 GiB) but not at a block's arrival (one more block: 14.25 GiB): nothing fits, the
    transition named; without the transition the same inputs stream; at 14.25 GiB it fits."""
    doc = calibration_document(bound_denoise=46 * GiB + GiB // 4)
    status, found = _plan_json(tmp_path, doc, "--device-memory", "14GiB")
    assert status == 1 and isinstance(found, dict) and not found["feasible"]
    assert found["shortfall"] == "transition" and DENOISE in found["reason"]
    loaded = load_calibration(doc)
    steady = attrs.evolve(
        loaded.target,
        phases=tuple(attrs.evolve(p, transition_bytes=None) for p in loaded.target.phases),
    )
    streams = solve(loaded.components, [steady], Device(14 * GiB, reserve_bytes=0))
    assert streams.placement("transformer").kind == PlacementKind.LAYERWISE
    status, found = _plan_json(tmp_path, doc, "--device-memory", str(14 * GiB + GiB // 4) + "B")
    assert status == 0 and isinstance(found, dict)
    arrival = next(u for u in found["phases"] if u["label"] == DENOISE)
    assert arrival["transition_headroom_bytes"] == 0


@pytest.fixture(scope="module")
def flux_document() -> dict:
    """The tiny FLUX's calibration as `dslc calibrate --save` writes it."""
    return json.loads(json.dumps(document(calibration())))


def _denoise_use(found: dict) -> dict:
    return next(u for u in found["phases"] if u["label"] == DENOISE)


def test_whole_counts_the_transformer_whole_in_the_denoising_phases(tmp_path, flux_document):
    """At 1 MiB the transformer streams its smaller layer, which arrives in the denoising phases
    (its kept layer and the incoming one: all of it there already); a refresh there (``--whole
    DenoisingStage=transformer``) counts all of it beside the resident others, and no layer
    arrives (no transition)."""
    device = ["--device-memory", "1MiB"]
    status, streamed = _plan_json(tmp_path, flux_document, *device)
    assert status == 0 and isinstance(streamed, dict)
    kinds = {c["name"]: c["placement"] for c in streamed["components"]}
    assert kinds["transformer"] == "layerwise"
    use = _denoise_use(streamed)
    assert use["weights_bytes"] == _resident_others(streamed) + TRANSFORMER
    assert use["transition_headroom_bytes"] is not None
    whole = ["--whole", "DenoisingStage=transformer"]
    status, found = _plan_json(tmp_path, flux_document, *device, *whole)
    assert status == 0 and isinstance(found, dict)
    use = _denoise_use(found)
    assert use["weights_bytes"] == _resident_others(found) + TRANSFORMER
    assert use["transition_headroom_bytes"] is None


def _resident_others(found: dict) -> int:
    return sum(c["device_bytes"] for c in found["components"] if c["name"] != "transformer")


def test_whole_in_a_phase_without_room_for_it_is_refused_naming_the_phase(tmp_path, flux_document):
    """The decoding phase (its 655 KiB bound and the vae) has no room for the whole transformer
    at 1 MiB: with ``--whole DecodingStage=transformer`` nothing fits, that phase named."""
    device = ["--device-memory", "1MiB"]
    status, plain = _plan_json(tmp_path, flux_document, *device)
    assert status == 0 and isinstance(plain, dict) and plain["feasible"]
    status, found = _plan_json(
        tmp_path, flux_document, *device, "--whole", "DecodingStage=transformer"
    )
    assert status == 1 and isinstance(found, dict) and not found["feasible"]
    assert found["shortfall"] == "device" and "DecodingStage" in found["reason"]


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("Denoising=transformer", "DenoisingStage, DecodingStage"),
        ("DenoisingStage=unet", "text_encoder, text_encoder_2, transformer, vae"),
        ("transformer", "STAGE=COMPONENT"),
    ],
)
def test_an_unknown_stage_or_component_is_a_usage_error_naming_the_known(
    tmp_path, flux_document, given, named
):
    status, output = _plan_json(
        tmp_path, flux_document, "--device-memory", "1MiB", "--whole", given
    )
    assert status == 2 and isinstance(output, str)
    assert "--whole" in output and all(n in output for n in named.split(", "))
    assert "Traceback" not in output


def test_the_lifecycle_inputs_carry_whole_from_its_settings():
    cal = calibration()
    phases = _phases(from_calibration(cal, (("DenoisingStage", "transformer"),)).target)
    assert phases[DENOISE].whole_components == ("transformer",)
    assert phases[DENOISE].transition_bytes is None  # needed whole there: nothing streams
    with pytest.raises(UnknownWholeError, match="TextEncodingStage"):
        from_calibration(cal, (("Nowhere", "transformer"),))


def test_the_lifecycle_plans_with_the_whole_its_settings_carry():
    """``Settings.whole`` (``dslc plan --validate --whole``) reaches the lifecycle's plan: the
    decoding stage needing the transformer whole fits nothing at 1 MiB, as `dslc plan` says."""
    from calibration.lifecycle.model import NOTHING_FITS
    from calibration.lifecycle.run import run_lifecycle
    from calibration.lifecycle.steps import Settings
    from tests.calibration.lifecycle_setup import STREAMING, points, session

    whole = (("DecodingStage", "transformer"),)
    for given, fits in (((), True), (whole, False)):
        fresh, _ = session()
        settings = Settings(STREAMING, "plan", whole=given)
        outcome = run_lifecycle(fresh, points(), settings, calibration=calibration())
        assert outcome.plan is not None and outcome.plan.feasible is fits
        assert (outcome.report.status == NOTHING_FITS) is not fits


def test_a_calibration_measured_streaming_block_by_block_adds_no_transition(flux_document):
    """Under ``--calibrate-offload group`` each phase's peak was measured with one block
    arriving: the transition is that measurement, the bound, nothing more."""
    from calibration.core.offload import Offload
    from calibration.plan.inputs import STREAMED_UNDER

    assert STREAMED_UNDER == {Offload.GROUP.value}
    doc = {**flux_document, "calibrated_under": {"offload": "group", "capacity_bytes": 1 << 20}}
    grouped = _phases(load_calibration(doc).target)
    plain = _phases(load_calibration(flux_document).target)
    assert plain[DENOISE].transition_bytes == plain[DENOISE].bound_bytes + LARGEST
    assert grouped[DENOISE].transition_bytes == grouped[DENOISE].bound_bytes
    in_memory = attrs.evolve(calibration(), offload="group")
    assert _phases(from_calibration(in_memory).target)[DENOISE].transition_bytes == (
        grouped[DENOISE].bound_bytes
    )
