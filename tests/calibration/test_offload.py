"""`calibration.core.offload` through the Python API: a session under diffusers' model or group
offloading on a capped CPU device, the automatic choice, and a plan taking over."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from calibration.calibrate.run import load_pipeline
from calibration.core.offload import Offload, allocator_reserve, calibrating_under, chosen
from calibration.core.session import Session
from calibration.errors import CalibrationError
from calibration.placement.mechanisms import has_offload_hooks
from calibration.plan.memory import allocator_margin
from calibration.plan.model import PlacementKind

pytest.importorskip("accelerate")

DATA = Path(__file__).resolve().parent / "data"
CAP = 640 * 1024
POINT = {"steps": 2, "size": 16}


def _two_tower():
    spec = importlib.util.spec_from_file_location("two_tower", DATA / "two_tower.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TWO_TOWER = _two_tower()


def _session(offload: Offload | None, capacity: int | None = CAP) -> Session:
    formulas = load_pipeline(DATA / "two_tower.wf", "two_tower")
    return Session(TWO_TOWER.build(0), formulas, "cpu", offload=offload, capacity=capacity)


def test_auto_offloads_only_what_exceeds_the_cap():
    assert chosen(Offload.AUTO, {"a": CAP, "b": CAP}, CAP) is Offload.MODEL
    assert chosen(Offload.AUTO, {"a": CAP // 2, "b": CAP // 2}, CAP) is Offload.NONE
    assert chosen(Offload.AUTO, {"a": CAP, "b": CAP}, None) is Offload.NONE
    assert chosen(Offload.GROUP, {"a": 1}, None) is Offload.GROUP


def test_auto_streams_a_component_larger_than_the_cap_less_the_reserve():
    assert chosen(Offload.AUTO, {"a": CAP + 1, "b": 1}, CAP) is Offload.GROUP
    assert chosen(Offload.AUTO, {"a": CAP, "b": 1}, CAP) is Offload.MODEL
    assert chosen(Offload.AUTO, {"a": CAP, "b": 1}, CAP, reserve=1) is Offload.GROUP
    assert allocator_reserve("cpu", CAP) == 0
    assert allocator_reserve("cuda:0", CAP) == allocator_margin(CAP)


@pytest.mark.parametrize("offload", [Offload.MODEL, Offload.GROUP])
def test_each_phase_holds_one_component_under_diffusers_offloading(offload):
    session = _session(offload)
    record = session.run(POINT)
    assert record.ok, record.error
    assert sum(session.weights.values()) > CAP
    assert record.peak_allocated <= CAP
    text = next(p for p in record.phases if p.kind == "stage" and p.name == "TextEncodingStage")
    denoiser = next(p for p in record.phases if p.kind == "component" and p.name == "denoiser")
    assert text.weights_bytes == session.weights["text_tower"]
    whole = session.weights["denoiser"]
    if offload is Offload.MODEL:
        assert denoiser.weights_bytes == whole
    else:  # its weights outside the blocks and one block: diffusers' groups, one at a time
        assert 0 < denoiser.weights_bytes < whole
    assert all(has_offload_hooks(m) for m in (session.pipe.text_tower, session.pipe.denoiser))


def test_a_component_onloaded_as_its_stage_starts_counts_in_that_stage():
    # model offload onloads the denoiser when it starts, and that start opens the denoising stage:
    # the move belongs to the new stage. Counted before the switch, the text stage held the
    # denoiser's weights (a level of 270,464 B) and the denoising stage's set-up a VAE's (on the
    # tiny Wan under a plan offloading it whole: 1.05 MiB measured, 113 KiB planned)
    session = _session(Offload.MODEL)
    record = session.run(POINT)
    assert record.ok, record.error
    text = next(p for p in record.phases if p.kind == "stage" and p.name == "TextEncodingStage")
    denoising = next(p for p in record.phases if p.kind == "stage" and p.name == "DenoisingStage")
    assert text.weight_levels is not None and denoising.weight_levels is not None
    assert {w for w, _ in text.weight_levels} <= {0, session.weights["text_tower"]}
    assert session.weights["denoiser"] in {w for w, _ in denoising.weight_levels}
    assert max(a for _, a in text.weight_levels) == text.activations_bytes


def test_the_placement_in_force_reaches_a_session_that_names_none():
    with calibrating_under(Offload.MODEL, CAP):
        session = _session(None, None)
    assert (session.offload, session.capacity) == (Offload.MODEL, CAP)
    assert _session(None, None).offload is Offload.NONE  # outside: auto, uncapped


def test_model_offload_needs_the_pipelines_sequence():
    formulas = load_pipeline(DATA / "two_tower.wf", "two_tower")
    pipe = TWO_TOWER.build(0)
    pipe.model_cpu_offload_seq = None
    with pytest.raises(CalibrationError, match="has no model_cpu_offload_seq"):
        Session(pipe, formulas, "cpu", offload=Offload.MODEL, capacity=CAP)


class _Placed:
    def __init__(self, component: str, kind: PlacementKind) -> None:
        self.component, self.kind = component, kind


class _Plan:
    def __init__(self, resident: set[str]) -> None:
        kinds = {True: PlacementKind.RESIDENT, False: PlacementKind.OFFLOADED}
        names = ("text_tower", "denoiser", "spare")
        self.placements = tuple(_Placed(n, kinds[n in resident]) for n in names)


def test_a_plan_takes_over_from_the_calibrations_offloading():
    session = _session(Offload.MODEL)
    session.hand_over(_Plan({"spare"}))
    assert not any(has_offload_hooks(m) for m in (session.pipe.text_tower, session.pipe.denoiser))
    assert session.recorder.backend.current_allocated() == session.weights["spare"]
    record = session.run(POINT)
    assert record.ok, record.error
    text = next(p for p in record.phases if p.kind == "stage" and p.name == "TextEncodingStage")
    assert text.weights_bytes == session.weights["spare"] + session.weights["text_tower"]


def test_a_plan_keeping_too_much_resident_meets_the_cap():
    session = _session(Offload.MODEL)
    session.hand_over(_Plan({"denoiser", "spare"}))  # the tower onloads beside the denoiser
    record = session.run(POINT)  # a plan's failure is the record's, not the calibration's
    assert record.error is not None
    assert record.error.type == "runtime.measure.residency.WeightsOverCapacity"
