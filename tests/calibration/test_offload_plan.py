"""Calibrating under a saved plan through the Python API: `Session(..., offload=read_plan(FILE))`
on a real tiny pipeline larger than its capped CPU device, the plan's hooks in place while it is
measured and gone afterwards, and a plan of another pipeline refused naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.run import load_pipeline
from calibration.core.offload import Offload
from calibration.core.session import Session
from calibration.core.shapes import Shapes
from calibration.errors import CalibrationError
from calibration.placement.mechanisms import has_offload_hooks
from calibration.plan.saved import PlanFileError, read_plan
from tests.calibration.test_offload import CAP, DATA, POINT, TWO_TOWER

pytest.importorskip("accelerate")

FORMULAS = load_pipeline(DATA / "two_tower.wf", "two_tower")


def _component(name: str, placement: str, layers: int = 0, kept: tuple[int, ...] = ()) -> dict:
    return {"name": name, "placement": placement, "layers": layers, "resident_layers": list(kept)}


def _plan_file(tmp_path: Path, *components: dict) -> Path:
    """A plan document as `dslc plan --json` writes one (the keys the reader needs)."""
    doc = {
        "version": 1,
        "feasible": True,
        "reason": "fits",
        "device": {"capacity_bytes": CAP, "reserve_bytes": 0},
        "components": list(components),
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return path


def _towers_offloaded(tmp_path: Path, denoiser: dict | None = None) -> Path:
    return _plan_file(
        tmp_path,
        _component("text_tower", "offloaded"),
        denoiser or _component("denoiser", "offloaded", 2),
        _component("spare", "resident"),
    )


def _hooked(pipe) -> list[bool]:
    return [has_offload_hooks(m) for m in (pipe.text_tower, pipe.denoiser, pipe.spare)]


def test_a_pipeline_larger_than_the_cap_is_measured_under_the_plan(tmp_path):
    saved = read_plan(_towers_offloaded(tmp_path))
    session = Session(TWO_TOWER.build(0), FORMULAS, "cpu", offload=saved, capacity=CAP)
    assert (session.offload, session.saved_plan) == (Offload.PLAN, saved)
    assert sum(session.weights.values()) > CAP
    assert _hooked(session.pipe) == [True, True, True]  # every component: the plan's own hook
    record = session.run(POINT)
    assert record.ok, record.error
    assert record.peak_allocated <= CAP
    text = next(p for p in record.phases if p.kind == "stage" and p.name == "TextEncodingStage")
    denoiser = next(p for p in record.phases if p.kind == "component" and p.name == "denoiser")
    spare = session.weights["spare"]  # resident: on the device in every phase
    assert text.weights_bytes == spare + session.weights["text_tower"]
    assert denoiser.weights_bytes == spare + session.weights["denoiser"]
    session.release()
    assert session.offload is Offload.NONE and _hooked(session.pipe) == [False, False, False]


def test_a_layerwise_component_streams_its_blocks_and_counts_whole_while_loaded(tmp_path):
    path = _towers_offloaded(tmp_path, _component("denoiser", "layerwise", 2, (1,)))
    session = Session(TWO_TOWER.build(0), FORMULAS, "cpu", offload=read_plan(path), capacity=CAP)
    assert session.applied is not None and session.applied.streamed == {"denoiser": ("blocks.0",)}
    record = session.run(POINT)
    assert record.ok, record.error
    denoiser = next(p for p in record.phases if p.kind == "component" and p.name == "denoiser")
    assert denoiser.weights_bytes == session.weights["spare"] + session.weights["denoiser"]


def test_calibrate_pipeline_takes_the_plan_off_afterwards(tmp_path):
    built = []

    def build(seed: int):
        built.append(TWO_TOWER.build(seed))
        return built[-1]

    cal = calibrate_pipeline(
        build,
        FORMULAS,
        Shapes({"steps": 1, "size": 8}, {"steps": 1, "size": 16}, {"steps": 2, "size": 16}),
        repeat=1,
        time_tolerance=None,
        offload=read_plan(_towers_offloaded(tmp_path)),
        capacity=CAP,
    )
    assert cal.saved_plan is not None
    assert (cal.offload, cal.saved_plan.path) == ("plan", str(tmp_path / "plan.json"))
    assert cal.saved_plan.placement() == {
        "text_tower": "offloaded",
        "denoiser": "offloaded",
        "spare": "resident",
    }
    assert _hooked(built[0]) == [False, False, False]


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (
            lambda t: _plan_file(t, _component("unet", "resident")),
            r"components\[0\]\.name: the pipeline has no component 'unet' \(it has 'text_tower'",
        ),
        (
            lambda t: _towers_offloaded(t, _component("denoiser", "layerwise", 3, (0,))),
            r"components\[1\]\.layers: 3, but the pipeline's denoiser has 2 repeated layers",
        ),
        (
            lambda t: _plan_file(t, _component("text_tower", "offloaded")),
            "components: no placement for 'denoiser', 'spare'",
        ),
    ],
)
def test_a_plan_of_another_pipeline_is_refused_and_leaves_it_as_it_was(tmp_path, plan, message):
    path = plan(tmp_path)
    pipe = TWO_TOWER.build(0)
    with pytest.raises(PlanFileError, match=f"^plan file {path}: {message}"):
        Session(pipe, FORMULAS, "cpu", offload=read_plan(path), capacity=CAP)
    assert _hooked(pipe) == [False, False, False]


def test_the_plan_offload_needs_its_file():
    with pytest.raises(CalibrationError, match="plan needs the plan's file: plan:FILE"):
        Session(TWO_TOWER.build(0), FORMULAS, "cpu", offload=Offload.PLAN, capacity=CAP)
