"""The one base class of every exception calibration raises at its users: ``CalibrationError``.

Under it: ``calibration.plan.PlanInputError`` (also a ``ValueError``), its subclasses
``PlanLimitError`` and ``calibration.plan.inputs.CalibrationFormatError``,
``calibration.plan.apply.PlanApplyError`` (also a ``ValueError``), ``CalibrationLimitError``, and
serving's ``calibration.serve.admission.RequestRefused`` (a request refused before any work) and
``calibration.serve.worker.RequestFailed`` (one that failed while it ran).
Errors of the formulas themselves (an unknown param, an inadmissible point) are the runtime's
``runtime.FormulaError``.
"""


class CalibrationError(Exception):
    """A problem with the request: bad formulas, a missing component, an inadmissible shape."""


class CalibrationLimitError(CalibrationError):
    """A request whose sizes would make calibration weigh more than a limit allows
    (``artifact.limits``: the corners of the warmup-probe box); the message says which and what
    to give instead."""
