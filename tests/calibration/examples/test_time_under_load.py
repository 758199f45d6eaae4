"""The project's examples calibrated beside a busy neighbour (a process spinning a core) raise no
time alarm: a time residual from a loaded clock is a `time-unknown` note at most
(calibration.probes.time_evidence). Two examples, one run each, to stay cheap; the ten-run figure
over every example is bench/time_load.py's (bench/README.md)."""

from __future__ import annotations

import pytest

from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.run import load_pipeline
from calibration.examples import EXAMPLES
from runtime.kinds import Quantity
from tests.calibration.examples.neighbour import busy_neighbour
from tests.calibration.lifecycle_setup import FORMULAS

pytest.importorskip("diffusers")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cogvideox", "flux"])
def test_an_example_under_load_raises_no_time_alarm(name):
    example = EXAMPLES[name]
    pipeline = load_pipeline(FORMULAS / example.formula_file, example.pipeline)
    with busy_neighbour() as spinner:
        cal = calibrate_pipeline(
            example.build, pipeline, example.shapes, call_kwargs=example.call_kwargs, repeat=3
        )
        assert spinner.poll() is None  # the neighbour was busy the whole time
    alarms = [f for f in cal.findings if f.quantity == Quantity.TIME and f.actionable]
    assert not alarms, [f.message for f in alarms]
