"""A saved calibration checked before the planner reads it: the strict JSON reader (no repeated
key, bounded digits and size, no FIFO or device), then its schema (types, version, bounds), then
every component a phase or a layer use names known. Every refusal names the place. A saved plan
(``calibration.plan.saved``) is read and checked by the same code against its own schema.

The schema (``calibration/schema/calibration.schema.json``) is checked with the ``jsonschema``
library rather than by hand: the types and bounds are data beside the document's description, and
the first error is taken lazily, so a hostile document costs one walk at most.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from attrs import define

from artifact.atomic import NotARegularFileError
from artifact.spelling import file_value, passed_value, path_text
from artifact.strict_json import read_regular, strict_loads

SCHEMA = Path(__file__).resolve().parents[1] / "schema" / "calibration.schema.json"
#: What the version check names a calibration document by (``first_violation``'s ``reads``).
CALIBRATION_READS = "a `dslc calibrate --json` document"
MAX_DOCUMENT_BYTES = 16 << 20  # a calibration document is a few KiB; refuse anything absurd
DOCUMENT_VERSION = (
    1  # the version `dslc calibrate` writes (calibration.calibrate.report.DOCUMENT_VERSION)
)
#: JSON objects a calibration document may hold: one a phase, layer use, stage, record (and its
#: params) and component of ``layer_bytes``, the planner and the server reading at most
#: ``MAX_ITEMS`` (100,000) of each list; a `dslc calibrate` document holds tens. Three times
#: ``MAX_ITEMS`` holds the largest list with room to spare and stops a million empty phases
#: (113 MB held, then refused by the schema) a third of the way.
MAX_DOCUMENT_OBJECTS = 300_000


class DocumentError(ValueError):
    """Why a calibration document is refused (the caller adds which document)."""


@define
class ObjectCount:
    """The parser's hook (``strict_loads``), each object as it is finished: more than ``limit``
    objects stop the parse there, before they are all held and the schema walks them."""

    limit: int = MAX_DOCUMENT_OBJECTS
    holds: str = "a calibration document holds one a phase, layer use, stage or record"
    objects: int = 0

    def __call__(self, obj: dict[str, object]) -> object:
        self.objects += 1
        if self.objects > self.limit:
            raise DocumentError(f"more than {self.limit:,} JSON objects; {self.holds}")
        return obj


def read_document(
    path: str | Path,
    what: str = "a calibration document",
    objects: Callable[[dict[str, object]], object] | None = None,
) -> Mapping[str, Any]:
    """A calibration file's JSON object (or ``what`` else), read strictly (``DocumentError``
    naming the file); ``objects`` sees each object as the parser finishes it (``strict_loads``;
    by default ``ObjectCount``: at most MAX_DOCUMENT_OBJECTS)."""
    shown = path_text(path)
    objects = ObjectCount() if objects is None else objects
    try:
        data = read_regular(path, MAX_DOCUMENT_BYTES)
    except NotARegularFileError as exc:
        raise DocumentError(f"{shown} {exc.strerror}") from None
    except OSError as exc:
        raise DocumentError(f"{shown}: {exc.strerror or exc}") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise DocumentError(f"{shown}: over {MAX_DOCUMENT_BYTES:,} bytes; {what} is a few KiB")
    try:
        doc = strict_loads(data, objects)
    except RecursionError:
        raise DocumentError(f"{shown}: not JSON: nested too deeply") from None
    except DocumentError as exc:  # ``objects`` refused what it saw
        raise DocumentError(f"{shown}: {exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the int digit limit, hooks
        raise DocumentError(f"{shown}: not JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise DocumentError(f"{shown}: {what} is a JSON object")
    return doc


def _integer(_checker: object, value: object) -> bool:
    """JSON Schema's ``integer``, without the integral floats it also counts (``1.0``): a reader
    indexes and counts with these values, so ``1.0`` is refused with its place, not read."""
    return isinstance(value, int) and not isinstance(value, bool)


@cache
def _validator(schema_path: Path) -> Any:  # jsonschema ships no type for it we can name
    from jsonschema import Draft202012Validator, validators

    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    strict = Draft202012Validator.TYPE_CHECKER.redefine("integer", _integer)
    return validators.extend(Draft202012Validator, type_checker=strict)(schema)


def first_violation(doc: Mapping[str, Any], schema_path: Path, reads: str) -> None:
    """The first violation of the schema at ``schema_path``, as a ``DocumentError`` naming the
    place (a version it does not have: ``reads`` says which document this reader reads)."""
    error = next(iter(_validator(schema_path).iter_errors(doc)), None)
    if error is not None:
        raise DocumentError(_message(error, reads))


def check_document(doc: Mapping[str, Any]) -> None:
    """The schema's first violation, then an unknown component, as a ``DocumentError``."""
    first_violation(doc, SCHEMA, CALIBRATION_READS)
    known = doc["component_weight_bytes"]
    for i, phase in enumerate(doc["phases"]):
        for j, name in enumerate(phase.get("active_components", ())):
            if name not in known:
                raise DocumentError(
                    f"phases[{i}].active_components[{j}]: unknown component {file_value(name)} "
                    f"(component_weight_bytes has {_names(known)})"
                )
    for i, use in enumerate(doc.get("layer_uses") or ()):
        if use["component"] not in known:
            raise DocumentError(
                f"layer_uses[{i}].component: unknown component {file_value(use['component'])} "
                f"(component_weight_bytes has {_names(known)})"
            )


def _names(known: Mapping[str, object]) -> str:
    names = [file_value(n) for n in list(known)[:8]]
    more = f" and {len(known) - 8:,} more" if len(known) > 8 else ""
    return (", ".join(names) or "none") + more


def _place(error: Any) -> str:
    """``phases[3].active_components``: where in the document, as the docs name keys."""
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the document"


def _message(error: Any, reads: str) -> str:
    """One line for the first schema violation, every value bounded (``file_value``)."""
    place, value = _place(error), error.instance
    kind, limit = error.validator, error.validator_value
    if kind == "required":
        missing = next((k for k in limit if isinstance(value, dict) and k not in value), "?")
        return f"{'' if place == 'the document' else place + ': '}missing key {missing!r}"
    if kind == "const":
        return f"version {file_value(value)} is not supported (only version {limit} is: {reads})"
    if kind == "enum":
        return f"{place}: {file_value(value)} is not one of {', '.join(map(repr, limit))}"
    if kind == "type":
        wanted = " or ".join([limit] if isinstance(limit, str) else limit)
        return f"{place}: expected {wanted}, got {_kind(value)} {file_value(value)}"
    if kind in ("minimum", "maximum", "exclusiveMinimum"):
        return f"{place}: {_range(error.schema)}, got {passed_value(value)}"
    if kind in ("maxItems", "maxProperties"):
        return f"{place}: {len(value):,} items; at most {limit:,}"
    if kind == "maxLength":
        return f"{place}: a string of {len(value):,} characters; at most {limit:,}"
    return f"{place}: fails the schema's {kind!r} ({file_value(limit)})"


def _range(schema: Mapping[str, Any]) -> str:
    """``must be an int >= 0 and <= 2**64``: the bounds a number breaks, as the schema has them."""
    high = schema.get("maximum")
    if schema.get("minimum") == 0 and isinstance(high, int) and high & (high - 1) == 0:
        return f"must be an int >= 0 and <= 2**{high.bit_length() - 1}"
    low = (">", schema["exclusiveMinimum"]) if "exclusiveMinimum" in schema else None
    low = low or (">=", schema.get("minimum"))
    return f"must be a number {low[0]} {low[1]} and <= {high}"


def _kind(value: object) -> str:
    """A JSON value's type, as the schema names types."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}.get(type(value), "value")
