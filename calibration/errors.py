"""The one base class of every exception calibration raises at its users: ``CalibrationError``.

Under it: ``calibration.plan.PlanInputError`` (also a ``ValueError``), its subclasses
``PlanLimitError`` and ``calibration.plan.inputs.CalibrationFormatError``, and
``calibration.plan.apply.PlanApplyError`` (also a ``ValueError``). Errors of the formulas
themselves (an unknown param, an inadmissible point) are the runtime's ``runtime.FormulaError``.
"""


class CalibrationError(Exception):
    """A problem with the request: bad formulas, a missing component, an inadmissible shape."""
