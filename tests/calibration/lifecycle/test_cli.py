"""``calibration.cli.validate``, the body of `dslc plan --validate`: the modes it offers, one
--target only, and the lifecycle it runs on an example (mode plan: measured and planned)."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from calibration.cli.options import Choice
from calibration.cli.validate import MODES, lifecycle, validate_command
from calibration.core.config import RunConfig
from calibration.core.shapes import Shapes
from calibration.lifecycle.model import Mode
from tests.calibration.lifecycle_setup import PROBE, STREAMING, TARGET

FORMULAS = Path(__file__).resolve().parents[3] / "formulas"
CHOICE = Choice("flux", None, FORMULAS, None)
SHAPES = Shapes({}, PROBE, TARGET)
CPU = RunConfig(device="cpu")


def test_the_modes_are_the_lifecycles():
    assert MODES == tuple(m.value for m in Mode) == ("off", "plan", "apply", "strict")


def test_validate_takes_one_target():
    from dslc.cli_support import Failure

    with pytest.raises(Failure, match="one --target"):
        validate_command(CHOICE, [SHAPES, SHAPES], CPU, STREAMING, "plan", False)


def test_the_example_is_measured_and_planned_in_mode_plan():
    outcome = lifecycle(CHOICE, SHAPES, attrs.evolve(CPU, repeat=1), STREAMING, "plan")
    report = outcome.report
    assert [s.name for s in report.steps] == ["warmup", "probes", "estimate", "plan"]
    assert report.step("plan")[0].data["placement"]["transformer"].startswith("layerwise")
    assert outcome.applied is None and report.status == 0
