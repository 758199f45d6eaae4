"""An example calibrated once at its demo shapes, one round and no time check: where the
predictor's oracle test and bench/predict.py both start."""

from __future__ import annotations

from pathlib import Path

from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.run import Calibration, load_pipeline
from calibration.examples import EXAMPLES
from runtime import Pipeline

FORMULAS = Path(__file__).resolve().parents[3] / "formulas"


def calibrated_example(name: str) -> tuple[Calibration, Pipeline]:
    """Example ``name``'s calibration and the formulas it was calibrated against
    (formulas/ of this repository)."""
    example = EXAMPLES[name]
    pipeline = load_pipeline(FORMULAS / example.formula_file, example.pipeline)
    cal = calibrate_pipeline(
        example.build,
        pipeline,
        example.shapes,
        call_kwargs=example.call_kwargs,
        repeat=1,
        time_tolerance=None,
    )
    return cal, pipeline
