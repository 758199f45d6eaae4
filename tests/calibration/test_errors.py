"""One base class a user can catch: every public calibration exception is a CalibrationError."""

from __future__ import annotations

import pytest

from calibration.errors import CalibrationError
from calibration.plan import Component, PlanInputError, PlanLimitError
from calibration.plan.apply import PlanApplyError
from calibration.plan.inputs import CalibrationFormatError, load_calibration


@pytest.mark.parametrize(
    ("error", "bases"),
    [
        (PlanInputError, (CalibrationError, ValueError)),
        (PlanLimitError, (PlanInputError,)),
        (CalibrationFormatError, (PlanInputError,)),
        (PlanApplyError, (CalibrationError, ValueError)),
    ],
)
def test_every_public_exception_is_a_calibration_error(error, bases):
    assert issubclass(error, CalibrationError)
    assert all(issubclass(error, base) for base in bases)


def test_catching_the_base_catches_the_planner():
    with pytest.raises(CalibrationError, match="must be an int >= 0"):
        Component("vae", -1)
    with pytest.raises(CalibrationError):
        load_calibration({"version": 1})
