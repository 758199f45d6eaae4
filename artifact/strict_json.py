"""JSON as the runtime reads untrusted files (artifacts, records): a repeated key or NaN/Infinity
is a ValueError, not a silent choice."""

from __future__ import annotations

import json

from artifact.spelling import file_value


def strict_loads(data: str | bytes | bytearray) -> object:
    """``json.loads`` refusing repeated keys and non-JSON constants (ValueError, RecursionError)."""
    return json.loads(data, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """json object hook: a key given twice would make the document ambiguous."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {file_value(key)} in a JSON object")
            seen.add(key)
    return obj


def _reject_constant(name: str) -> object:
    """json hook: NaN and Infinity are not JSON and not exact."""
    raise ValueError(f"{name} is not valid JSON")
