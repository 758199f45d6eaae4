"""`--strict` and the `call` arguments a pipeline takes only through ``**kwargs`` (diffusers drops
an unknown keyword without a word): each must be named by ``__call__`` or shown used by two measured
sizes (``calibration.core.calls.unproven_calls``); and a time band wider than its prediction is read
as "time unknown" (``calibration.calibrate.verdict.time_check``).

The pipelines are the tests' real tiny SD 1.5 (``calibration.examples.tiny_sd``): as diffusers
builds it, whose ``__call__`` names its arguments and takes ``**kwargs``, and ``ForwardingSD``, a
wrapper as users write them, whose ``__call__`` names only some and forwards the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from artifact.point import Point
from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.report import document
from calibration.calibrate.run import Calibration, load_pipeline
from calibration.calibrate.verdict import STRICT_FAILED, TimeCheck, time_check, verdict
from calibration.cli.calibrate import calibrate
from calibration.core.calls import UnprovenCall, footprint, unnamed_calls, unproven_calls
from calibration.core.shapes import Shapes
from runtime import Pipeline
from runtime.record import Phase, StageIterations, WarmupRecord

pytest.importorskip("diffusers")

HERE = Path(__file__).resolve().parent
CUSTOM_SD = HERE / "data" / "custom_sd.wf"
FRAMES = (
    (
        "    param cfg: bool = true  # guidance_scale 7.5 > 1\n",
        "    param frames: int = 1 in [1, 8]\n",
    ),
    ("    call guidance_scale = if cfg then 7.5 else 1\n", "    call num_frames = frames\n"),
)


def build(seed: int = 0) -> Any:  # Any: a diffusers pipeline
    """The tiny SD 1.5 behind a ``__call__`` that names only steps and guidance."""
    from diffusers import StableDiffusionPipeline

    from calibration.examples import tiny_sd

    class ForwardingSD(StableDiffusionPipeline):
        def __call__(
            self, prompt: object = None, num_inference_steps: int = 50,
            guidance_scale: float = 7.5, **kwargs: object,
        ) -> object:  # fmt: skip
            forward: Any = super().__call__  # type: ignore[misc]  # mypy misses diffusers' own
            return forward(
                prompt=prompt,
                num_inference_steps=num_inference_steps,
                guidance_scale=guidance_scale,
                **kwargs,
            )

    pipe: Any = ForwardingSD(**tiny_sd.build(seed).components)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def call_kwargs(seed: int = 0) -> dict[str, object]:
    """The tiny SD's constant arguments (``--pipeline`` reads them from this module)."""
    from calibration.examples import tiny_sd

    return tiny_sd.call_kwargs(seed)


def with_frames(tmp_path: Path) -> Path:
    """custom_sd.wf with a `frames` param passed as `call num_frames`, which SD never reads."""
    text = CUSTOM_SD.read_text()
    for line, added in FRAMES:
        assert line in text, line
        text = text.replace(line, line + added)
    path = tmp_path / "custom_sd.wf"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def pipe() -> object:
    return build()


def formulas(tmp_path: Path) -> Pipeline:
    return load_pipeline(with_frames(tmp_path), "custom_sd")


def record(params: Point, peak: int, unet_calls: int = 3) -> WarmupRecord:
    """A record with one phase: its peak and the UNet's counted calls are what a call changes."""
    return WarmupRecord(
        pipeline="custom_sd", device="cpu", backend="cpu-live-tensors", params=params,
        error=None, baseline_allocated=100, peak_allocated=100 + peak, peak_reserved=100 + peak,
        duration_s=1.0,
        phases=(Phase("stage", "DenoisingStage", "DenoisingStage", 1, 100, 100 + peak, 0, 1.0),),
        stage_iterations=(StageIterations("DenoisingStage", unet_calls, unet_calls, "counted"),),
    )  # fmt: skip


def point(**changes: int | bool) -> dict[str, int | bool]:
    return {"steps": 2, "height": 32, "width": 32, "cfg": True, "frames": 1, **changes}


def test_only_the_arguments_call_does_not_name_are_suspects(tmp_path: Path, pipe: object) -> None:
    assert unnamed_calls(formulas(tmp_path), pipe) == ("height", "width", "num_frames")


def test_a_pair_moving_one_group_with_another_peak_shows_its_arguments_used(
    tmp_path: Path, pipe: object
) -> None:
    pipeline = formulas(tmp_path)
    records = [record(point(), 1000), record(point(height=64, width=64), 4000)]
    assert unproven_calls(pipeline, pipe, records) == (UnprovenCall("num_frames", None),)
    assert "no two measured sizes differ in it alone" in UnprovenCall("num_frames", None).message


def test_a_pair_moving_frames_alone_with_the_same_footprint_is_no_proof(
    tmp_path: Path, pipe: object
) -> None:
    pipeline = formulas(tmp_path)
    same = [record(point(), 1000), record(point(frames=4), 1000)]
    (alike,) = [c for c in unproven_calls(pipeline, pipe, same) if c.arg == "num_frames"]
    assert alike.seen == (1, 4)
    assert "measured at num_frames=1 and 4: same memory and work" in alike.message
    counted = [record(point(), 1000), record(point(frames=4), 1000, unet_calls=12)]
    assert footprint(counted[0]) != footprint(counted[1])
    assert "num_frames" not in [c.arg for c in unproven_calls(pipeline, pipe, counted)]


def test_a_difference_a_named_argument_may_explain_proves_nothing(
    tmp_path: Path, pipe: object
) -> None:
    pipeline = formulas(tmp_path)
    both = [record(point(), 1000), record(point(steps=6, frames=4), 9000)]  # steps is named
    assert [c.arg for c in unproven_calls(pipeline, pipe, both)] == [
        "height", "width", "num_frames",
    ]  # fmt: skip


def _calibrate(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(calibrate, list(args), catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout), result.stderr


@pytest.mark.slow
def test_strict_fails_on_a_call_argument_the_pipeline_ignores(tmp_path: Path) -> None:
    status, doc, err = _calibrate(
        "--pipeline", f"{HERE / 'custom_pipeline.py'}:build",
        "--formulas", str(with_frames(tmp_path)),
        "--probe", "steps=2,height=32,width=32,frames=1",
        "--target", "steps=6,height=64,width=64,frames=4",
        "--repeat", "1", "--no-time-probe", "--strict", "--json",
    )  # fmt: skip
    assert status == STRICT_FAILED, (err, doc["verdict"])
    assert "warning[call-argument]" in err
    assert (
        "`call num_frames` may never reach the pipeline (measured at num_frames=1"
        in (doc["verdict"]["findings"])
    )
    assert doc["verdict"]["exit_status"] == STRICT_FAILED


@pytest.fixture(scope="module")
def forwarded() -> Calibration:
    """The tiny SD behind ``ForwardingSD``: height and width reach it through ``**kwargs``."""
    pipeline = load_pipeline(CUSTOM_SD, "custom_sd")
    start = {"steps": 2, "height": 32, "width": 32}
    return calibrate_pipeline(
        build, pipeline, Shapes(start, start, {"steps": 6, "height": 64, "width": 64}),
        call_kwargs=call_kwargs, repeat=1, verify=True, time_tolerance=None,
        formula_path=str(CUSTOM_SD),
    )  # fmt: skip


@pytest.mark.slow
def test_strict_passes_call_arguments_a_measured_pair_shows_used(forwarded: Calibration) -> None:
    assert "height" in " ".join(forwarded.call_warnings)  # suspects: not named by __call__
    assert forwarded.unproven_calls == ()  # the height-and-width size changed the peaks
    judged = verdict(forwarded, strict=True)
    assert judged.status == 0, judged.line
    assert "reach the pipeline" not in judged.findings


def test_a_band_wider_than_the_prediction_is_time_unknown() -> None:
    check, said = time_check(100.0, 0.031, 0.7276)  # two sigma: 1455 ms of a 100 ms prediction
    assert check is TimeCheck.UNKNOWN
    assert said == "time unknown: band ±1455% wider than the prediction (measured +3.1%)"
    assert time_check(100.0, 0.031, 0.05)[0] is TimeCheck.WITHIN  # ±100 %: as wide, not wider
    assert time_check(100.0, -0.5, 0.01)[0] is TimeCheck.OUTSIDE
    assert time_check(None, None, 0.01)[0] is TimeCheck.NOT_VERIFIED
    assert time_check(100.0, 0.031, None)[0] is TimeCheck.NO_SPREAD


@pytest.mark.slow
def test_the_verdict_line_and_the_json_say_time_unknown(forwarded: Calibration) -> None:
    timing = forwarded.estimate.timing
    assert timing.seconds is not None and forwarded.measured is not None
    wide = attrs.evolve(
        forwarded,
        estimate=attrs.evolve(
            forwarded.estimate, timing=attrs.evolve(timing, spread_s=timing.seconds * 7.276)
        ),
    )
    judged = verdict(wide)
    assert judged.time_check is TimeCheck.UNKNOWN
    assert "time unknown: band ±1455% wider than the prediction" in judged.line
    doc = document(wide)["verdict"]
    assert isinstance(doc, dict) and doc["time_check"] == "unknown"
    assert str(doc["time"]).startswith("time unknown: band ±1455%")
