"""Declared probe minimums (`probe frames >= 9` in formulas/wan.wf, `>= 17` in cogvideox.wf):
planned sizes never go below them, and a size asked for below one is reported."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from calibration.calibrate.run import load_pipeline, shapes
from calibration.cli.calibrate import calibrate
from calibration.core.shapes import Shapes
from calibration.examples import EXAMPLES
from calibration.probes.minimums import below_minimums, raise_to_minimums
from tests.examples import ROOT


def test_the_video_formulas_declare_their_steady_regime(wan_1_3b) -> None:
    assert dict(wan_1_3b.probe_minimums) == {"frames": 9}
    cogvideox = load_pipeline(ROOT / "formulas" / "cogvideox.wf", "cogvideox_2b")
    assert dict(cogvideox.probe_minimums) == {"frames": 17}


def test_a_size_below_a_minimum_is_raised_to_the_smallest_admissible_value(wan_1_3b) -> None:
    point = {"steps": 2, "frames": 5, "height": 32, "width": 32}
    assert raise_to_minimums(wan_1_3b, point)["frames"] == 9  # frames % 4 == 1 admits 9
    assert raise_to_minimums(wan_1_3b, {**point, "frames": 13}) == {**point, "frames": 13}
    # a target below the minimum caps it: the probe never grows past the target
    assert raise_to_minimums(wan_1_3b, point, {"frames": 5})["frames"] == 5
    assert raise_to_minimums(wan_1_3b, {"steps": 2}) == {"steps": 2}  # no frames set: unchanged


def test_planned_sizes_respect_the_minimum_and_asked_ones_are_reported(wan_1_3b) -> None:
    low = {"steps": 2, "frames": 5, "height": 32, "width": 32}
    target = {"steps": 8, "frames": 33, "height": 64, "width": 64}
    # the demo defaults say 5 frames: calibrate plans 9 instead, for the probe and the warmup
    planned = shapes(wan_1_3b, Shapes(low, low, target))
    probe, warmup = planned.probe, planned.warmup
    assert (probe["frames"], warmup["frames"]) == (9, 9)
    assert below_minimums(wan_1_3b, {"probe": probe, "warmup": warmup}) == ()
    # asked for on the command line (`--probe frames=5`): kept, and reported; the warmup's default
    # is capped by the probe (never larger than it), so it stays at 5 frames too
    asked = shapes(wan_1_3b, Shapes(low, low, target), probe={"frames": 5})
    probe, warmup = asked.probe, asked.warmup
    assert (probe["frames"], warmup["frames"]) == (5, 5)
    found = below_minimums(wan_1_3b, {"probe": probe, "warmup": warmup})
    assert [(b.role, b.axis, b.value, b.minimum) for b in found] == [
        ("probe", "frames", 5, 9),
        ("warmup", "frames", 5, 9),
    ]
    assert "frames = 5, below the formulas' probe minimum frames >= 9" in found[0].message


def test_the_built_in_video_examples_already_probe_in_the_steady_regime() -> None:
    for name in ("wan", "cogvideox"):
        example = EXAMPLES[name]
        pipeline = load_pipeline(ROOT / "formulas" / example.formula_file, example.pipeline)
        demo = example.shapes
        points = {"warmup": demo.warmup, "probe": demo.probe, "target": demo.target}
        assert below_minimums(pipeline, points) == (), name


@pytest.mark.slow
def test_calibrate_warns_about_a_probe_below_the_minimum_in_text_and_json() -> None:
    pytest.importorskip("diffusers")
    args = ["--repeat", "1", "--no-time-probe", "--probe", "frames=5"]
    runner = CliRunner()
    result = runner.invoke(calibrate, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["probe"]["frames"] == 5
    (below,) = doc["below_minimum"]
    assert (below["role"], below["axis"], below["value"], below["minimum"]) == (
        "probe",
        "frames",
        5,
        9,
    )
    warning = "warning[probe-below-minimum]: the probe sets frames = 5, below the formulas' probe "
    assert warning + "minimum frames >= 9" in result.stderr
