"""The parser's LALR tables kept between processes, as plain JSON in a folder only the user can
write: building them takes 0.2 s of every command, reading them back 20 ms (bench/README.md,
"parser start").

Nothing in the file can run code when it is read: it is Lark's own serialized form
(`Lark.memo_serialize`, what `lark.tools.standalone` embeds), parsed by the project's strict JSON
reader and rebuilt with `Lark._load_from_dict`, which instantiates only Lark's rule and terminal
classes. It is never a pickle. The folder must be a directory owned by the effective user that
no one else may write (created 0700); the file is opened relative to it without following links
and without blocking, and must be a regular file of the same owner, not writable by others, of
bounded size. Anything else (a link, a FIFO, a device, another user's file or folder) is left
untouched, named in one note on stderr, and the grammar is built in memory. A file that is ours
but stale, truncated or not a cache is rebuilt and replaced (a new file renamed over the old
name, so a concurrent reader sees the old file or the new one, never half of one).
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import secrets
import stat
import sys
from collections.abc import Mapping
from typing import TypeAlias

import attrs
import lark
from lark.grammar import Rule
from lark.lexer import TerminalDef

from artifact.strict_json import read_at_most, strict_loads

__all__ = ["MAX_CACHE_BYTES", "cache_folder", "cache_name", "cached_parser"]

FORMAT = "dslc LALR tables"
FORMAT_VERSION = 1
MAX_CACHE_BYTES = 4 << 20  # the tables take 0.13 MB; anything much larger is not ours
_TUPLE = "()"  # {"()": [...]}: a tuple (Lark hashes some, so a list will not do)
_INT_KEYS = "{int}"  # {"{int}": [[key, value], ...]}: a dict keyed by integers (parse states)

# Options a cached parser is loaded with whatever the file says (Lark lets a file set them).
_LOAD_DEFAULTS: dict[str, object] = {
    "lexer_callbacks": {},
    "use_bytes": False,
    "debug": False,
    "g_regex_flags": 0,
    "regex": False,
    "propagate_positions": False,
    "tree_class": None,
    "_plugins": {},
}
_NOT_SAVED = ("postlex", "transformer", "cache", "lexer_callbacks", "_plugins", "tree_class")

Json: TypeAlias = "None | bool | int | str | list[Json] | dict[str, Json]"


class _Found(enum.Enum):
    """What the cache path held."""

    TABLES = "tables"  # a valid cache for this grammar
    STALE = "stale"  # nothing, or a file of ours that is not a valid cache: build and replace
    FOREIGN = "foreign"  # something we must not read or replace: build in memory, with a note


@attrs.frozen
class _Lookup:
    found: _Found
    tables: Mapping[str, object] | None = None
    note: str = ""


def cache_folder() -> str | None:
    """`DSLC_CACHE_DIR` (empty: no cache), else `$XDG_CACHE_HOME/dslc` or `~/.cache/dslc`; None
    for a relative folder (it would depend on the working directory)."""
    folder = os.environ.get("DSLC_CACHE_DIR")
    if folder is None:
        home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(home, "dslc")
    if not folder or not os.path.isabs(folder):
        return None
    return folder


def cache_name() -> str:
    """The file's name in the folder: one per Lark version and format."""
    return f"workload-lark{lark.__version__}-v{FORMAT_VERSION}.json"


def cached_parser(
    grammar: str, options: Mapping[str, object], **runtime: object
) -> tuple[lark.Lark, str | None]:
    """`lark.Lark(grammar, **options, **runtime)`, its tables read from the cache when a valid one
    is there and written there when not; with the note to print when the cache was refused.

    `options` decide the tables (they are part of the cache key); `runtime` are the objects a
    loaded parser is given afresh (transformer, post-lexer)."""
    folder = cache_folder()
    if folder is None or os.open not in os.supports_dir_fd:
        return _build(grammar, options, runtime), None
    key = _key(grammar, options)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return _build(grammar, options, runtime), None  # nowhere to keep it (read-only home)
    try:
        refused = _refuse_folder(os.fstat(dir_fd))
        if refused:
            return _build(grammar, options, runtime), _note(folder, refused)
        lookup = _read(dir_fd, key)
        if lookup.tables is not None:
            loaded = _load(lookup.tables, runtime)
            if loaded is not None:
                return loaded, None
        parser = _build(grammar, options, runtime)
        if lookup.found is _Found.FOREIGN:
            return parser, _note(os.path.join(folder, cache_name()), lookup.note)
        _write(dir_fd, key, parser)
        return parser, None
    finally:
        os.close(dir_fd)


def _build(grammar: str, options: Mapping[str, object], runtime: Mapping[str, object]) -> lark.Lark:
    return lark.Lark(grammar, **options, **runtime)


def _key(grammar: str, options: Mapping[str, object]) -> str:
    """What the tables depend on: the grammar, the options, Lark's and Python's versions."""
    parts = [FORMAT, str(FORMAT_VERSION), lark.__version__, repr(sys.version_info[:2])]
    parts += [f"{name}={options[name]!r}" for name in sorted(options)]
    return hashlib.sha256("\0".join([*parts, grammar]).encode("utf-8")).hexdigest()


def _note(path: str, why: str) -> str:
    shown = "".join(c if c.isprintable() else "\ufffd" for c in path)  # never drives a terminal
    return f"dslc: note: parser cache {shown} {why}; not used (the grammar is built in memory)"


def _refuse_folder(info: os.stat_result) -> str:
    """Why a folder may not hold the cache ('' when it may)."""
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid != os.geteuid():
        return f"belongs to user {info.st_uid}, not to {os.geteuid()}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by others (mode {stat.S_IMODE(info.st_mode):o}; 700 is safe)"
    return ""


def _refuse_file(info: os.stat_result) -> str:
    """Why an existing entry at the cache path is not ours to read or replace ('' when it is)."""
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if info.st_uid != os.geteuid():
        return f"belongs to user {info.st_uid}, not to {os.geteuid()}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return ""


def _read(dir_fd: int, key: str) -> _Lookup:
    """The cache file's tables, or why there are none: opened without following a link or
    waiting on a FIFO, checked with fstat before a byte is read, read no further than the limit."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(cache_name(), flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return _Lookup(_Found.STALE)
    except OSError as exc:  # ELOOP: a symbolic link; ENXIO: a socket; EACCES ...
        try:
            info = os.stat(cache_name(), dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return _Lookup(_Found.FOREIGN, note=f"cannot be opened ({exc.strerror})")
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        return _Lookup(_Found.FOREIGN, note=f"is {kind}")
    try:
        info = os.fstat(fd)
        refused = _refuse_file(info)
        if refused:
            return _Lookup(_Found.FOREIGN, note=refused)
        if info.st_size > MAX_CACHE_BYTES:
            return _Lookup(_Found.STALE)
        data = read_at_most(fd, MAX_CACHE_BYTES)
    except OSError:
        return _Lookup(_Found.STALE)
    finally:
        os.close(fd)
    if len(data) > MAX_CACHE_BYTES:
        return _Lookup(_Found.STALE)
    tables = _tables(data, key)
    return _Lookup(_Found.STALE) if tables is None else _Lookup(_Found.TABLES, tables)


def _tables(data: bytes, key: str) -> Mapping[str, object] | None:
    """The decoded `{"data", "memo"}` of a cache document for `key`, else None."""
    try:
        doc = strict_loads(data, _untag)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, a repeated key, a bad tag
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key:
        return None
    tables = doc.get("tables")
    if not isinstance(tables, dict) or set(tables) != {"data", "memo"}:
        return None
    return tables


def _load(tables: Mapping[str, object], runtime: Mapping[str, object]) -> lark.Lark | None:
    """Lark rebuilt from its serialized tables, or None when they do not make a parser."""
    try:
        return lark.Lark._load_from_dict(
            tables["data"], tables["memo"], **_LOAD_DEFAULTS, **runtime
        )
    except Exception:  # noqa: BLE001 - a document of the wrong shape: Lark raises anything
        return None


def _write(dir_fd: int, key: str, parser: lark.Lark) -> None:
    """Write the tables to a fresh file of ours and rename it over the cache name, unless the
    name now holds something not ours; best effort (a full disk only costs the next run)."""
    try:
        data, memo = parser.memo_serialize([TerminalDef, Rule])
        data["options"] = {k: v for k, v in data["options"].items() if k not in _NOT_SAVED}
        tables = {"data": data, "memo": memo}
        doc = {"format": FORMAT, "key": key, "tables": _encode(tables)}
        text = json.dumps(doc, separators=(",", ":"))
        if strict_loads(text, _untag) != {**doc, "tables": tables}:  # read back as it was
            return
    except (TypeError, ValueError):  # a type the encoding does not keep: no cache
        return
    temporary = f".{cache_name()}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(temporary, flags, 0o600, dir_fd=dir_fd)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if _replaceable(dir_fd):
            os.replace(temporary, cache_name(), src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return
    except OSError:
        pass
    try:
        os.unlink(temporary, dir_fd=dir_fd)
    except OSError:
        pass


def _replaceable(dir_fd: int) -> bool:
    """Nothing at the cache name, or a regular file of ours (never a link or a FIFO put there
    since it was read)."""
    try:
        info = os.stat(cache_name(), dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return True
    return not _refuse_file(info)


def _encode(value: object) -> Json:
    """Lark's serialized tables as JSON: tuples and integer-keyed dicts tagged, nothing else
    allowed (TypeError)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(item) for item in value]}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) and k not in (_TUPLE, _INT_KEYS) for k in value):
            return {k: _encode(v) for k, v in value.items()}
        if all(isinstance(k, int) and not isinstance(k, bool) for k in value):
            return {_INT_KEYS: [[k, _encode(v)] for k, v in value.items()]}
    raise TypeError(f"cannot keep a {type(value).__name__} in the parser cache")


def _untag(obj: dict[str, object]) -> object:
    """One JSON object of `_encode`'s output back as Lark wrote it (the strict reader's object
    hook, innermost first); ValueError for a tag of the wrong shape."""
    if len(obj) == 1 and _TUPLE in obj:
        items = obj[_TUPLE]
        if not isinstance(items, list):
            raise ValueError("a tuple is a list")
        return tuple(items)
    if len(obj) == 1 and _INT_KEYS in obj:
        return _int_keyed(obj[_INT_KEYS])
    return obj


def _int_keyed(pairs: object) -> dict[int, object]:
    if not isinstance(pairs, list):
        raise ValueError("integer keys are a list of pairs")  # noqa: TRY004 - the reader's error
    out: dict[int, object] = {}
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int):
            raise ValueError("a pair is [integer, value]")
        out[pair[0]] = pair[1]
    if len(out) != len(pairs):
        raise ValueError("a repeated integer key")
    return out
