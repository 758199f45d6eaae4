"""The one exception calibration raises at its users."""


class CalibrationError(Exception):
    """A problem with the request: bad formulas, a missing component, an inadmissible shape."""
