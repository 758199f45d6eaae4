"""The shipped formulas follow the regimes diffusers' code has: HunyuanVideo's VAE decodes in
temporal tiles past 17 frames (formulas/hunyuan_video.wf), Helios's UniPC scheduler keeps more from
the second and third step on and its history latents rule the text stage's window once larger than
the encoder's peak (formulas/helios.wf). Sizes across each kink leave nothing to act on
(bench/README.md, "HunyuanVideo and Helios formulas"); with the former formulas they were
formula-mismatches."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

import pytest

from artifact.point import Point
from calibration.calibrate.run import full_point, load_pipeline
from calibration.core.host import quiet_libraries
from calibration.core.session import Session
from calibration.probes.finding import Finding
from calibration.probes.findings import check
from runtime.kinds import FindingKind
from runtime.measure.diffusers_hooks import DiffusersPipeline
from tests.calibration.families import helios, hunyuan_video

pytest.importorskip("diffusers")

FORMULAS = Path(__file__).resolve().parents[3] / "formulas"


def _memory_findings(
    file: str,
    name: str,
    build: Callable[[int], object],
    call_kwargs: Callable[[int], Mapping[str, object]],
    sizes: Sequence[Point],
    target: Point,
) -> list[Finding]:
    """The memory findings of the sizes (the first measured twice: a warm start) at ``target``."""
    formulas = load_pipeline(FORMULAS / file, name)
    points = [full_point(formulas, size, "size") for size in sizes]
    with quiet_libraries():
        pipe = cast(DiffusersPipeline, build(0))  # the family factories return a diffusers pipeline
        session = Session(pipe, formulas, "cpu", call_kwargs=call_kwargs)
        records = [session.run(point) for point in [points[0], *points]]
    assert all(r.ok for r in records), [r.error for r in records]
    goal = full_point(formulas, target, "target")
    findings = check(formulas, records, goal, session.recorder.backend.name).findings
    return [f for f in findings if f.quantity == "memory"]


def _judged(findings: list[Finding]) -> list[str]:
    """What the findings ask to act on (a formula-mismatch, a term the sizes cannot estimate)."""
    return [f.message for f in findings if f.actionable]


def test_hunyuan_video_decoding_past_its_temporal_tiles_leaves_nothing_to_act_on():
    # 13 frames: one pass; 17: one tile; 29 and 41: one and two whole tiles held while the last
    # whole one decodes; two sizes a side. The former `frames * height * width` missed 3 MiB.
    sides_frames = ((32, 13), (32, 17), (32, 29), (48, 29), (32, 41), (48, 17))
    sizes = [
        {"steps": 1, "frames": f, "height": s, "width": s, "cfg": False} for s, f in sides_frames
    ]
    target = {"steps": 1, "frames": 53, "height": 48, "width": 48, "cfg": False}
    findings = _memory_findings(
        "hunyuan_video.wf",
        "hunyuan_video_t2v",
        hunyuan_video.build,
        hunyuan_video.call_kwargs,
        sizes,
        target,
    )
    assert not [f for f in findings if f.stage == "DecodingStage"], [f.message for f in findings]
    assert not _judged(findings)


def test_helios_across_the_scheduler_steps_and_the_history_leaves_nothing_to_act_on():
    # steps 1, 2 and 3+ (the scheduler's regimes), with and without CFG (one latent more from the
    # second step with it); 48 x 48 and larger: the history latents above the tiny encoder's peak
    # in the text stage's window, 32 x 32 below it (probe-regime at most).
    spec = (
        (1, 48, 48, False),
        (2, 48, 48, False),
        (3, 48, 48, False),
        (4, 48, 48, False),
        (2, 64, 48, False),
        (3, 64, 64, False),
        (2, 32, 32, False),
        (1, 48, 48, True),
        (2, 48, 48, True),
        (3, 64, 48, True),
    )
    sizes = [
        {"steps": n, "frames": 33, "height": h, "width": w, "cfg": cfg} for n, h, w, cfg in spec
    ]
    target = {"steps": 8, "frames": 33, "height": 64, "width": 64, "cfg": True}
    findings = _memory_findings(
        "helios.wf", "helios", helios.build, helios.call_kwargs, sizes, target
    )
    assert not _judged(findings)
    text = [f for f in findings if f.stage == "TextEncodingStage"]
    assert all(f.kind is FindingKind.PROBE_REGIME for f in text), [f.message for f in text]
