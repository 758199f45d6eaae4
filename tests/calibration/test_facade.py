"""The Python facade on the real tiny FLUX (CPU, exact backend): calibrate a pipeline held in hand,
plan it, apply and undo the plan, spell it for accelerate and diffusers; a pipeline that already
carries diffusers' offloading is adopted with a warning, never refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.errors import CalibrationError
from calibration.examples import EXAMPLES
from calibration.facade import PipelineHooksWarning, calibrate
from calibration.placement.mechanisms import has_offload_hooks

pytest.importorskip("accelerate")

FORMULAS = Path(__file__).resolve().parents[2] / "formulas" / "flux.wf"
PROBE = {"steps": 1, "height": 32, "width": 32}
TARGET = {"steps": 2, "height": 64, "width": 64}
FLUX = EXAMPLES["flux"]


def _calibrated(pipe):
    return calibrate(
        pipe,
        FORMULAS,
        name="flux1_dev",
        target=TARGET,
        probe=PROBE,
        repeat=1,
        time_probe=False,
        call_kwargs=FLUX.call_kwargs,
    )


@pytest.fixture(scope="module")
def calibrated():
    pipe = FLUX.build(0)
    return pipe, _calibrated(pipe)


def test_calibrate_plan_apply_undo(calibrated):
    pipe, cal = calibrated
    assert cal.calibration.pipeline == "flux1_dev"
    plan = cal.plan(capacity=1 << 20, reserve=0, device="cpu")  # the docs' 1 MiB: not all fit
    moved = {p.component for p in plan.plan.placements if p.kind.value != "resident"}
    assert moved  # the weights are more than 1 MiB: something is offloaded or streamed
    handle = plan.apply(pipe)
    assert {n for n in moved if has_offload_hooks(getattr(pipe, n))} == moved
    handle.undo()
    assert not any(has_offload_hooks(m) for m in pipe.components.values() if hasattr(m, "modules"))


def test_the_plan_spelt_for_accelerate_and_diffusers(calibrated):
    _, cal = calibrated
    plan = cal.plan(capacity="1MiB", reserve=0, device="cuda:1")
    spelt = plan.to_accelerate()
    kinds = {p.component: p.kind.value for p in plan.plan.placements}
    offloaded = {name for name, kind in kinds.items() if kind == "offloaded"}
    assert {n for n, d in spelt["device_map"].items() if d == "cpu"} == offloaded
    assert spelt["max_memory"] == {"1": 1 << 20}
    calls = plan.to_diffusers()
    starts = {
        "resident": "pipe.{}.to('cuda:1')",
        "offloaded": "accelerate.cpu_offload_with_hook(pipe.{}, 'cuda:1')",
        "layerwise": "pipe.{}.enable_group_offload('cuda:1'",
    }
    for call, (name, kind) in zip(calls, kinds.items(), strict=True):
        assert call.startswith(starts[kind].format(name)), (call, kind)


def test_nothing_fits_is_a_typed_error_naming_the_phase(calibrated):
    _, cal = calibrated
    with pytest.raises(CalibrationError, match="nothing fits"):
        cal.plan(capacity=1024, reserve=0)
    with pytest.raises(CalibrationError, match="capacity"):
        cal.plan(capacity="lots")


def test_a_pipeline_under_model_offload_is_adopted_with_a_warning():
    from calibration.placement.pipeline import offload_model
    from runtime.measure.diffusers_hooks import pipeline_modules

    pipe = FLUX.build(0)
    offload_model(pipe, "cpu", pipeline_modules(pipe))  # enable_model_cpu_offload, on the CPU
    assert has_offload_hooks(pipe.transformer)
    with pytest.warns(PipelineHooksWarning, match="calibrated under model offload as it was"):
        cal = _calibrated(pipe)
    assert cal.calibration.offload == "model"
    assert not has_offload_hooks(pipe.transformer)  # the calibration's own hooks are off too
