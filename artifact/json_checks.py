"""Small checks of JSON values (objects, lists, ints, texts, names, spans), each carrying the path
of the value it checks for its messages.

Paths are linked `(parent, segment)` pairs, rendered (`pipelines[0].stages[1].iterations.expr`)
only when an error is raised.
"""

from __future__ import annotations

from collections.abc import Mapping

from artifact.errors import ArtifactError, ArtifactLimitError
from artifact.ir import Span
from artifact.limits import MAX_INT_DIGITS, MAX_NAME_LENGTH, MAX_TEXT_LENGTH
from artifact.spelling import file_value

__all__ = [
    "SMALL",
    "as_int",
    "as_list",
    "as_name",
    "as_object",
    "as_span",
    "as_text",
    "describe",
    "fail",
    "into",
    "over_limit",
]

_INT_BOUND = 10**MAX_INT_DIGITS  # |v| < 10**4300  <=>  at most 4300 decimal digits
SMALL = 1 << 64  # ints below this many bits are far inside the 4,300-digit limit


def into(path: object, segment: str) -> tuple[object, str]:
    """Extend a linked (parent, segment) path; rendered to text only when an error is raised."""
    return (path, segment)


def render(path: object) -> str:
    """`pipelines[0].stages[1].iterations.expr` from the linked path."""
    parts: list[str] = []
    while isinstance(path, tuple):
        path, segment = path
        parts.append(f"[{segment}]" if type(segment) is int else str(segment))
    return "".join(reversed(parts)).lstrip(".")


def location(path: object) -> tuple[str | int, ...]:
    """`("pipelines", 0, "stages", 1, "iterations", "expr")` from the linked path."""
    steps: list[str | int] = []
    while isinstance(path, tuple):
        path, segment = path
        if type(segment) is int:
            steps.append(segment)
        elif str(segment).startswith("["):
            steps.append(int(str(segment)[1:-1]))
        else:
            steps.append(str(segment).lstrip("."))
    return tuple(reversed(steps))


def fail(path: object, problem: str) -> ArtifactError:
    """The error to raise for a problem at `path`."""
    return ArtifactError(render(path), problem, location(path))


def over_limit(path: object, problem: str, *, limit: str) -> ArtifactLimitError:
    """The error to raise when the artifact at `path` exceeds a resource limit (`limit`: its name
    in artifact.limits)."""
    return ArtifactLimitError(render(path), problem, location(path), limit=limit)


def describe(value: object) -> str:
    """A value as messages name it: its JSON kind and a short rendering."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    if value is None:
        return "null"
    return f"{names.get(type(value), type(value).__name__)} {file_value(value)}"


def as_object(
    value: object, path: object, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Mapping[str, object]:
    """Check an object has exactly the expected keys (missing or extra keys are errors)."""
    if type(value) is not dict and not isinstance(value, Mapping):
        raise fail(path, f"expected an object, got {describe(value)}")
    for key in required:
        if key not in value:
            raise fail(path, f"missing key {key!r}")
    if len(value) > len(required):
        allowed = set(required) | set(optional)
        for key in value:
            if key not in allowed:
                raise fail(path, f"unexpected key {file_value(key)}")
    return value


def as_list(value: object, path: object) -> list[object] | tuple[object, ...]:
    """A JSON array (a list or tuple)."""
    if type(value) is not list and not isinstance(value, (list, tuple)):
        raise fail(path, f"expected a list, got {describe(value)}")
    return value


def as_int(value: object, path: object, low: int | None = None) -> int:
    """An exact integer: JSON `true` is not one, nor is `1.0`; at most 4,300 digits."""
    if type(value) is not int:
        raise fail(path, f"expected an integer, got {describe(value)}")
    if not -_INT_BOUND < value < _INT_BOUND:
        raise over_limit(
            path, f"integer has more than {MAX_INT_DIGITS} digits", limit="MAX_INT_DIGITS"
        )
    if low is not None and value < low:
        raise fail(path, f"expected an integer >= {low}, got {value}")
    return value


def as_text(value: object, path: object) -> str:
    """A string of bounded length (texts are shown in messages, never parsed)."""
    if type(value) is not str:
        raise fail(path, f"expected a string, got {describe(value)}")
    if len(value) > MAX_TEXT_LENGTH:
        raise over_limit(
            path, f"string longer than {MAX_TEXT_LENGTH} characters", limit="MAX_TEXT_LENGTH"
        )
    return value


def as_name(value: object, path: object) -> str:
    """An identifier `[A-Za-z_][A-Za-z0-9_]*` of at most 64 characters."""
    if type(value) is not str:
        raise fail(path, f"expected a name, got {describe(value)}")
    if len(value) > MAX_NAME_LENGTH and value.isascii() and value.isidentifier():
        raise over_limit(
            path,
            f"invalid name {file_value(value)}: {len(value)} characters, over the limit of "
            f"{MAX_NAME_LENGTH}",
            limit="MAX_NAME_LENGTH",
        )
    if not (value.isascii() and value.isidentifier()):
        raise fail(
            path,
            f"invalid name {file_value(value)} "
            f"(want [A-Za-z_][A-Za-z0-9_]*, <= {MAX_NAME_LENGTH} chars)",
        )
    return value


def as_span(value: object, path: object, n_sources: int, nullable: bool = False) -> Span | None:
    """A span: a source index in range and 1-based positions, end not before start."""
    if value is None and nullable:
        return None
    if type(value) is dict and len(value) == 5:  # the well-formed case, without a call per key
        span = (
            value.get("source"),
            value.get("line"),
            value.get("column"),
            value.get("end_line"),
            value.get("end_column"),
        )
        source, line, column, end_line, end_column = span
        if (
            type(source) is int
            and type(line) is int
            and type(column) is int
            and type(end_line) is int
            and type(end_column) is int
            and 0 <= source < n_sources
            and 1 <= line < SMALL
            and 1 <= column < SMALL
            and 1 <= end_line < SMALL
            and 1 <= end_column < SMALL
            and (end_line, end_column) >= (line, column)
        ):
            return span  # type: ignore[return-value]
    obj = as_object(value, path, ("source", "line", "column", "end_line", "end_column"))
    source = as_int(obj["source"], into(path, ".source"), 0)
    if source >= n_sources:
        raise fail(into(path, ".source"), f"source index {source} but only {n_sources} sources")
    line, column = (
        as_int(obj["line"], into(path, ".line"), 1),
        as_int(obj["column"], into(path, ".column"), 1),
    )
    end_line = as_int(obj["end_line"], into(path, ".end_line"), 1)
    end_column = as_int(obj["end_column"], into(path, ".end_column"), 1)
    if (end_line, end_column) < (line, column):
        raise fail(path, "span ends before it starts")
    return (source, line, column, end_line, end_column)
