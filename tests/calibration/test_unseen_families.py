"""Issue 39 item 1 on families the project never saw: each tiny pipeline of
``tests/calibration/families`` (SD3, Sana, LTX-Video, Lumina 2) with its drafted formulas
(``tests/calibration/data/unseen``) calibrated on a device capped below its largest component,
``auto`` choosing group offload, and verified at the target: every block list of these layouts
(SD3's joint blocks and its CLIPs' layers two levels down, Sana's linear-attention blocks, LTX's
VAE's blocks inside an encoder and a decoder, Lumina 2's three block lists) is moved group by
group, and every phase's bound holds."""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

import attrs
import pytest

from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.run import Calibration, load_pipeline
from calibration.core.offload import Offload
from calibration.core.shapes import Shapes
from runtime.kinds import FindingKind

pytest.importorskip("accelerate")

DATA = Path(__file__).resolve().parent / "data" / "unseen"


@attrs.frozen
class Family:
    """A tiny family at shapes where a cap below its transformer leaves the target room."""

    module: str
    probe: dict[str, int]
    target: dict[str, int]
    cap: int  # 90 % of the transformer, above group offload's need at the target


FAMILIES = {
    "sd3": Family(
        "sd3",
        {"steps": 2, "height": 32, "width": 32},
        {"steps": 4, "height": 64, "width": 64},
        4_365_000,
    ),
    "sana": Family(
        "sana",
        {"steps": 2, "height": 32, "width": 32},
        {"steps": 4, "height": 64, "width": 32},
        37_600_000,
    ),
    "lumina2": Family(
        "lumina2",
        {"steps": 2, "height": 32, "width": 32},
        {"steps": 4, "height": 64, "width": 64},
        17_760_000,
    ),
    "ltx": Family(
        "ltx",
        {"steps": 2, "frames": 1, "height": 32, "width": 32},
        {"steps": 4, "frames": 1, "height": 64, "width": 32},
        38_400_000,
    ),
}


@functools.cache
def _calibrated(name: str) -> Calibration:
    family = FAMILIES[name]
    module = importlib.import_module(f"tests.calibration.families.{family.module}")
    return calibrate_pipeline(
        module.build,
        load_pipeline(DATA / f"{name}.wf", name),
        Shapes(family.probe, family.probe, family.target),
        call_kwargs=module.call_kwargs,
        verify=True,
        repeat=1,
        threads=1,
        time_tolerance=None,
        offload=Offload.AUTO,
        capacity=family.cap,
    )


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_cap_below_the_transformer_calibrates_under_group_offload(name):
    cal = _calibrated(name)
    transformer = cal.component_weight_bytes["transformer"]
    assert transformer > FAMILIES[name].cap
    assert Offload(cal.offload) is Offload.GROUP
    held = cal.phase_weights["component:transformer@DenoisingStage"]
    assert 0 < held < transformer  # its blocks moved one at a time, never the whole


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_capped_bound_holds_at_the_target(name):
    cal = _calibrated(name)
    assert cal.measured is not None and cal.measured.ok
    measured = {(p.kind, p.name, p.stage): p.peak_allocated for p in cal.measured.phases}
    for p in cal.estimate.phases:
        assert p.peak.bound_bytes is not None, (p.label, p.peak.reason)
        assert measured[(p.kind, p.name, p.stage)] <= p.peak.bound_bytes, p.label
    assert FindingKind.BOUND_UNDER not in {f.kind for f in cal.findings}
