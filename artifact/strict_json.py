"""JSON as the runtime reads untrusted files (artifacts, records, calibrations): a repeated key or
NaN/Infinity is a ValueError, not a silent choice; how deep a document may nest does not depend on
how deep the caller's stack is; a file is read only when it is a regular one, and only so far."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable

from artifact.atomic import NotARegularFileError, kind_of
from artifact.spelling import file_value
from artifact.stack import retried_on_fresh_stack


def strict_loads(
    data: str | bytes | bytearray, objects: Callable[[dict[str, object]], object] | None = None
) -> object:
    """``json.loads`` refusing repeated keys and non-JSON constants (ValueError, RecursionError);
    ``objects``, when given, turns each object (its keys checked) into what the caller keeps,
    innermost first, as ``object_pairs_hook`` would.

    The C parser counts nesting against the interpreter's recursion limit together with the
    caller's frames: a document refused 600 frames deep is parsed again on a fresh stack
    (``artifact.stack``), so only the document's own depth decides."""
    return retried_on_fresh_stack(lambda: _loads(data, objects))


def _loads(
    data: str | bytes | bytearray, objects: Callable[[dict[str, object]], object] | None
) -> object:
    if objects is None:
        return json.loads(data, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)

    def hook(pairs: list[tuple[str, object]]) -> object:
        return objects(_no_duplicates(pairs))

    return json.loads(data, object_pairs_hook=hook, parse_constant=_reject_constant)


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


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit + 1`` bytes of a regular file (links followed), counted as they are read.

    Opened non-blocking, so a FIFO never waits for a writer; anything but a regular file (a FIFO,
    ``/dev/zero``, a directory, a link to one) is a ``NotARegularFileError`` before a byte is read,
    and the size is what was read, not ``st_size`` (0 for a device). OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFileError(path, kind_of(mode))
        return read_at_most(fd, limit)
    finally:
        os.close(fd)


def read_at_most(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes from ``fd``, counted as they are read: one byte past the limit
    says the file is too large without reading the rest."""
    chunks: list[bytes] = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
