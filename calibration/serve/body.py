"""A generation request's JSON body, as untrusted input: bounded, strict, checked against the
loaded formulas' params before anything is queued (the runtime's own messages, as the CLI shows).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from attrs import frozen

from artifact.point import Point
from artifact.strict_json import strict_loads
from runtime import FormulaError, Pipeline

#: The largest body read (a request's params are a few dozen bytes); beyond it: 413.
MAX_BODY_BYTES = 16 * 1024
#: The most keys a body may hold (the params and the response format).
MAX_KEYS = 64
RESPONSE_FORMAT = "response_format"


class Format(enum.StrEnum):
    """What a generation answers: its metadata alone, or with the image as base64 PNG."""

    METADATA = "metadata"
    PNG = "png"


class BadBody(Exception):
    """A body the worker refuses before queueing it: the HTTP status and the message to send."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@frozen
class Asked:
    """One generation asked for: the complete point (defaults filled in) and the answer's format."""

    point: Point
    format: Format


def parse(data: bytes, pipeline: Pipeline, defaults: Mapping[str, int | bool]) -> Asked:
    """``data`` (at most ``MAX_BODY_BYTES``) as an admissible point of ``pipeline``; ``BadBody``:
    400 for what is not a JSON object of params, 422 for params the formulas refuse."""
    if len(data) > MAX_BODY_BYTES:
        raise BadBody(413, f"the body is over {MAX_BODY_BYTES:,} bytes")
    try:
        doc = strict_loads(data)
    except RecursionError:
        raise BadBody(400, "the body is not JSON: nested too deeply") from None
    except ValueError as exc:  # not JSON, not UTF-8, NaN, a repeated key, too many digits
        raise BadBody(400, f"the body is not JSON: {str(exc)[:200]}") from None
    if not isinstance(doc, dict):
        raise BadBody(400, f"the body is a JSON {type(doc).__name__}; send an object of params")
    if len(doc) > MAX_KEYS:
        raise BadBody(400, f"the body has {len(doc)} keys; at most {MAX_KEYS}")
    answer = _format(doc.pop(RESPONSE_FORMAT, Format.METADATA.value))
    point = {**defaults, **doc}
    try:
        pipeline.evaluate(**point)
    except FormulaError as exc:  # unknown names, types, ranges, contracts: the CLI's message
        raise BadBody(422, str(exc)) from None
    return Asked(point, answer)


def _format(value: object) -> Format:
    if not isinstance(value, str) or value not in tuple(Format):
        shown = repr(value)[:60]
        raise BadBody(400, f"response_format {shown} is not one of {', '.join(Format)}")
    return Format(value)
