"""The runtime's own errors beside the loader's (artifact/errors.py): all are ``FormulaError``s, so
a serving worker catches the runtime's whole family at once, and ``ValueError``s, as the values
that cause them are."""

from __future__ import annotations

from artifact.errors import FormulaError

__all__ = ["RecordFormatError", "RecordMismatchError", "RuntimeValueError"]


class RecordFormatError(FormulaError, ValueError):
    """A record file or JSON value that is not a valid warmup record of this version."""


class RecordMismatchError(FormulaError, ValueError):
    """Warmup records that do not fit what they are used with: another pipeline's, params the
    pipeline lacks, or records whose structure differs across ranks."""


class RuntimeValueError(FormulaError, ValueError):
    """A value a runtime call cannot use: a margin below 1, params a warmup request cannot record,
    layerwise components that are no components, a negative explicit iteration count."""
