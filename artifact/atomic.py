"""Atomic text files: readers never see half a file (artifacts, records, formatted sources).

The text goes to a temporary file next to the target, is fsynced, then renamed over it. A symlink
is written through (the temporary file sits next to the link's final target, which is replaced;
the link stays). A target that exists and is not a regular file (a FIFO, a device such as
`/dev/full`, a directory) is refused with `NotARegularFileError`, never replaced. The new file's
mode is an existing target's, else `0o666` less the umask, set with `fchmod` on the temporary
file: the process umask is read, never changed (changing it would race with other threads).
"""

from __future__ import annotations

import os
import stat
from _thread import allocate_lock

__all__ = [
    "NotARegularFileError",
    "check_regular",
    "current_umask",
    "kind_of",
    "write_atomically",
    "write_bytes_atomically",
]


class NotARegularFileError(OSError):
    """A path that exists but is not a regular file (a FIFO, a device, a directory, a socket)."""

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        super().__init__(f"{os.fspath(path)} is {kind}, not a regular file")
        self.strerror = f"is {kind}, not a regular file"
        self.filename = os.fspath(path)
        self.kind = kind


def kind_of(mode: int) -> str:
    """What a non-regular file is, for messages."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def check_regular(path: str | os.PathLike[str]) -> os.stat_result | None:
    """The stat of `path` (following links) when it is a regular file, None when it does not
    exist; anything else raises NotARegularFileError (so nobody opens a FIFO and blocks)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFileError(path, kind_of(info.st_mode))
    return info


_FALLBACK_LOCK = allocate_lock()  # (not threading: `import runtime` stays light)
_fallback_umask: int | None = None


def current_umask() -> int:
    """The process umask, read without changing it (Linux: /proc/self/status); elsewhere read once
    by setting and restoring it, and remembered."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    global _fallback_umask
    with _FALLBACK_LOCK:
        if _fallback_umask is None:
            _fallback_umask = os.umask(0o022)
            os.umask(_fallback_umask)
        return _fallback_umask


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Write a temporary file next to the (link-resolved) target, fsync, then rename it over.

    Raises NotARegularFileError for an existing target that is not a regular file, TypeError
    for anything but text (before touching the disk).
    """
    if not isinstance(text, str):
        raise TypeError(f"write_atomically writes text, not {type(text).__name__}")
    write_bytes_atomically(path, text.encode("utf-8"))


def write_bytes_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """``write_atomically`` for bytes (a figure): the same links, modes and refusals."""
    import tempfile  # here, not at the top: the loader imports this module but never writes
    from pathlib import Path

    target = Path(os.path.realpath(path))  # through symlinks: the link stays, its target changes
    target.parent.mkdir(parents=True, exist_ok=True)
    existing = check_regular(target)
    mode = stat.S_IMODE(existing.st_mode) if existing else 0o666 & ~current_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)  # mkstemp makes 0600 files
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
