"""Warmup records: what one warmup request measured, as frozen values with an exact JSON round trip.

A record is what the recorder (``runtime.measure``) hands to the estimators: memory peaks per
phase and per iteration, durations, the stage ``(measured, target)`` iteration pairs taken from
the compiled formulas, and how often each layer of a layerwise component ran. The JSON form is
versioned (``RECORD_VERSION``) and checked strictly on the way in, so a file written by another
version or edited by hand is refused with a ``RecordFormatError`` rather than half-read.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import NoReturn, TypeVar

import attrs
from attrs import field, frozen

from artifact.atomic import NotARegularFileError, check_regular, write_atomically
from artifact.spelling import file_value
from artifact.strict_json import read_regular, strict_loads
from runtime.errors import RecordFormatError
from runtime.kinds import PhaseKind
from runtime.levels import MAX_WEIGHT_LEVELS

RECORD_FORMAT = "warmup-records"
RECORD_VERSION = 1
MAX_RECORDS_BYTES = 256 * 1024 * 1024  # a records file is read whole: refuse a larger one first

#: Where a stage's ``measured`` iteration count came from, most authoritative first.
ITERATION_SOURCES = ("explicit", "counted", "formula")

ParamValue = int | bool
_A = TypeVar("_A", bound=attrs.AttrsInstance)


def _freeze_params(value: Mapping[str, ParamValue]) -> Mapping[str, ParamValue]:
    """Point are read-only so a record can never be changed after the fact."""
    return MappingProxyType(dict(value))


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    """Component lists are stored as tuples so records stay immutable and comparable."""
    return tuple(value)


def _levels(value: Iterable[Iterable[int]] | None) -> tuple[tuple[int, int], ...] | None:
    """Weights levels are stored as tuples of pairs (a loaded record's lists become them)."""
    if value is None:
        return None
    pairs = [tuple(pair) for pair in value]
    return tuple((int(pair[0]), int(pair[1])) for pair in pairs)


LEVELS_TEXT = f"null or at most {MAX_WEIGHT_LEVELS} [weights, activations] pairs of integers"


def _is_levels(value: object) -> bool:
    """A record's weights levels: a bounded list of pairs of non-negative integers."""
    return (
        isinstance(value, list)
        and len(value) <= MAX_WEIGHT_LEVELS
        and all(
            isinstance(pair, list)
            and len(pair) == 2
            and all(type(v) is int and v >= 0 for v in pair)
            for pair in value
        )
    )


def _phases(value: Iterable[Phase]) -> tuple[Phase, ...]:
    """Nested values are tuples, so a record is immutable all the way down."""
    return tuple(value)


def _iterations(value: Iterable[Iteration]) -> tuple[Iteration, ...]:
    """Nested values are tuples, so a record is immutable all the way down."""
    return tuple(value)


def _pairs(value: Iterable[StageIterations]) -> tuple[StageIterations, ...]:
    """Nested values are tuples, so a record is immutable all the way down."""
    return tuple(value)


def _uses(value: Iterable[LayerUse]) -> tuple[LayerUse, ...]:
    """Nested values are tuples, so a record is immutable all the way down."""
    return tuple(value)


@frozen
class ErrorInfo:
    """Why a request failed: the exception's qualified type name and its message."""

    type: str
    message: str

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        """Keep only strings, so a record never holds a traceback (and the tensors it pins)."""
        kind = type(exc)
        name = (
            kind.__qualname__
            if kind.__module__ == "builtins"
            else f"{kind.__module__}.{kind.__qualname__}"
        )
        return cls(type=name, message=str(exc))


@frozen
class Phase:
    """One phase of a request: its windows merged by (kind, name, stage), with their peak."""

    kind: str
    name: str
    stage: str | None
    count: int
    allocated_before: int
    peak_allocated: int
    peak_reserved: int
    duration_s: float
    active_components: tuple[str, ...] = field(converter=_strings, default=())
    used_components: tuple[str, ...] = field(converter=_strings, default=())
    weights_bytes: int | None = None  # of the peak: weights on the device (the rest: activations)
    # the highest live bytes less the weights on the device: the activations' own peak (under
    # offload the weights change within a phase, and its peak need not be theirs); None: not seen
    activations_bytes: int | None = None
    # the activations' own peak per amount of weights on the device: (weights, activations) pairs
    # on their pareto frontier, fewest weights first (``runtime.levels``); None: not seen
    weight_levels: tuple[tuple[int, int], ...] | None = field(default=None, converter=_levels)


@frozen
class Iteration:
    """One run of a stage's repeated unit (a denoising step): its peak and duration."""

    stage: str
    index: int
    peak_allocated: int
    peak_reserved: int
    duration_s: float


@frozen
class StageIterations:
    """How often a stage's unit ran in the probe (measured) and runs at the default workload."""

    stage: str
    measured: int
    target: int
    source: str


@frozen
class LayerUse:
    """How often one layer of a layerwise component ran within one stage (None: no stage)."""

    component: str
    layer: str
    stage: str | None
    calls: int


@frozen
class WarmupRecord:
    """Everything one warmup request measured; the estimators' only input besides the formulas."""

    pipeline: str
    device: str
    backend: str
    params: Mapping[str, ParamValue] = field(converter=_freeze_params, hash=False)
    error: ErrorInfo | None
    baseline_allocated: int
    peak_allocated: int
    peak_reserved: int
    duration_s: float
    phases: tuple[Phase, ...] = field(converter=_phases, default=())
    iterations: tuple[Iteration, ...] = field(converter=_iterations, default=())
    stage_iterations: tuple[StageIterations, ...] = field(converter=_pairs, default=())
    layer_uses: tuple[LayerUse, ...] = field(converter=_uses, default=())

    @property
    def ok(self) -> bool:
        """True when the request finished without raising."""
        return self.error is None

    def above_baseline(self, peak: int) -> int:
        """The one definition of a measured memory: a peak of this request (a phase's, or its own)
        above what was live before it, so every reader fits and checks the same bytes."""
        return peak - self.baseline_allocated

    @property
    def peak_above_baseline(self) -> int:
        """Activation memory of the request: its allocator peak above its baseline."""
        return self.above_baseline(self.peak_allocated)

    @property
    def stage_durations(self) -> dict[str, float]:
        """Seconds spent in each stage, in stage order."""
        return {p.name: p.duration_s for p in self.phases if p.kind == PhaseKind.STAGE}

    def iteration_pairs(self) -> dict[str, tuple[int, int]]:
        """``{stage: (measured, target)}`` as the estimators consume it."""
        return {s.stage: (s.measured, s.target) for s in self.stage_iterations}

    def layer_totals(self) -> dict[tuple[str, str], int]:
        """Calls per ``(component, layer)`` summed over stages."""
        totals: dict[tuple[str, str], int] = {}
        for use in self.layer_uses:
            key = (use.component, use.layer)
            totals[key] = totals.get(key, 0) + use.calls
        return totals

    def __reduce__(self) -> tuple[Callable[[object], WarmupRecord], tuple[dict[str, object]]]:
        """Pickle through the JSON form (the read-only params mapping cannot be pickled itself)."""
        return (WarmupRecord.from_json, (self.to_json(),))

    def to_json(self) -> dict[str, object]:
        """The versioned JSON value of this record (plain dicts, lists, strings and numbers)."""
        return {"version": RECORD_VERSION, **_encode_fields(self, type(self))}

    @classmethod
    def from_json(cls, value: object) -> WarmupRecord:
        """Rebuild a record from ``to_json``'s value, refusing anything else."""
        obj = _expect_keys(value, {"version"} | _FIELDS[cls], "record")
        if obj["version"] != RECORD_VERSION or type(obj["version"]) is not int:
            raise RecordFormatError(
                f"record version {file_value(obj['version'])} is not supported "
                f"(this runtime reads version {RECORD_VERSION})"
            )
        return _decode(cls, {k: v for k, v in obj.items() if k != "version"}, "record")


# --- JSON encoding: one table of field kinds, so encode and decode cannot drift apart ----------

_NESTED: dict[type, dict[str, type]] = {
    WarmupRecord: {
        "error": ErrorInfo,
        "phases": Phase,
        "iterations": Iteration,
        "stage_iterations": StageIterations,
        "layer_uses": LayerUse,
    },
}
_FIELDS: dict[type, set[str]] = {
    cls: {f.name for f in attrs.fields(cls)}
    for cls in (WarmupRecord, ErrorInfo, Phase, Iteration, StageIterations, LayerUse)
}


def _encode_fields(value: object, cls: type[attrs.AttrsInstance]) -> dict[str, object]:
    """An attrs value's fields (``cls`` is its type), each encoded."""
    return {f.name: _encode(getattr(value, f.name)) for f in attrs.fields(cls)}


def _encode(value: object) -> object:
    """Attrs values become dicts, tuples lists, mappings dicts; scalars pass through."""
    cls = type(value)
    if attrs.has(cls):
        return _encode_fields(value, cls)
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _encode(v) for k, v in value.items()}
    return value


#: Keys a record written before they existed may lack (the field's default is read).
OPTIONAL_KEYS = frozenset({"weights_bytes", "activations_bytes", "weight_levels"})


def _expect_keys(value: object, keys: set[str], where: str) -> dict[str, object]:
    """Exactly these keys, so a typo or a field from another version is an error, not a default."""
    if not isinstance(value, dict):
        raise RecordFormatError(f"{where}: expected an object, got {type(value).__name__}")
    missing, extra = keys - value.keys() - OPTIONAL_KEYS, value.keys() - keys
    if missing or extra:
        raise RecordFormatError(
            f"{where}: missing keys {sorted(missing)}, unexpected keys {sorted(extra)}"
        )
    return value


def _check(ok: bool, where: str, what: str, value: object) -> None:
    """Raise a RecordFormatError naming the field unless ``ok``."""
    if not ok:
        _fail(where, what, value)


def _fail(where: str, what: str, value: object) -> NoReturn:
    """Raise a RecordFormatError naming the field and what it should have been."""
    raise RecordFormatError(f"{where}: expected {what}, got {file_value(value)}")


def _scalar(kind: object, value: object, where: str) -> object:
    """Check one scalar field against its annotation (a bool is never an int, nor the reverse)."""
    if kind in ("str", str):
        _check(isinstance(value, str), where, "a string", value)
    elif kind in ("str | None",):
        _check(value is None or isinstance(value, str), where, "a string or null", value)
    elif kind in ("int", int):
        _check(type(value) is int and value >= 0, where, "a non-negative integer", value)
    elif kind == "int | None":
        ok = value is None or (type(value) is int and value >= 0)
        _check(ok, where, "a non-negative integer or null", value)
    elif kind in ("float", float):
        if type(value) not in (int, float) or not isinstance(value, (int, float)):
            _fail(where, "a finite non-negative number", value)  # (no bool, nor a subclass)
        _check(math.isfinite(value) and value >= 0, where, "a finite non-negative number", value)
        value = float(value)
    elif kind == "tuple[tuple[int, int], ...] | None":
        _check(value is None or _is_levels(value), where, LEVELS_TEXT, value)
    elif kind == "tuple[str, ...]":
        _check(
            isinstance(value, list) and all(isinstance(v, str) for v in value),
            where,
            "a list of strings",
            value,
        )
    elif kind == "Mapping[str, ParamValue]":
        ok = isinstance(value, dict) and all(type(v) in (int, bool) for v in value.values())
        _check(ok, where, "an object of integers and booleans", value)
    else:  # pragma: no cover - guards the table above against a new field type
        raise AssertionError(f"no decoder for field type {kind!r}")
    return value


def _decode(cls: type[_A], obj: dict[str, object], where: str) -> _A:
    """Build ``cls`` from a checked dict, recursing into the nested value types."""
    nested = _NESTED.get(cls, {})
    kwargs: dict[str, object] = {}
    for f in attrs.fields(cls):
        if f.name not in obj:  # an optional key (``OPTIONAL_KEYS``): its default
            continue
        raw, at = obj[f.name], f"{where}.{f.name}"
        inner = nested.get(f.name)
        if inner is None:
            kwargs[f.name] = _scalar(f.type, raw, at)
        elif f.name == "error":
            kwargs[f.name] = (
                None if raw is None else _decode(inner, _expect_keys(raw, _FIELDS[inner], at), at)
            )
        else:
            if not isinstance(raw, list):
                _fail(at, "a list", raw)
            kwargs[f.name] = tuple(
                _decode(inner, _expect_keys(item, _FIELDS[inner], f"{at}[{i}]"), f"{at}[{i}]")
                for i, item in enumerate(raw)
            )
    return cls(**kwargs)


# --- files -------------------------------------------------------------------------------------


def dumps_records(records: Iterable[WarmupRecord]) -> str:
    """The text of a records file: format name, version and the records in order, one per line."""
    return _document([r.to_json() for r in records])


def _document(values: Sequence[object]) -> str:
    """A records file from records' JSON values: one line each (json's C encoder: no indent)."""
    head = json.dumps({"format": RECORD_FORMAT, "version": RECORD_VERSION})[:-1]
    lines = ",\n".join(json.dumps(v, allow_nan=False) for v in values)
    return f'{head}, "records": [\n{lines}\n]}}\n' if values else f'{head}, "records": []}}\n'


def loads_records(text: str | bytes) -> list[WarmupRecord]:
    """Parse a records file's text (or UTF-8 bytes), refusing another format or version.

    Everything malformed is a RecordFormatError: not JSON, not UTF-8, nested too deeply, an
    integer over Python's 4,300-digit limit, a key given twice.
    """
    return [WarmupRecord.from_json(r) for r in _records_json(text)]


def _records_json(text: str | bytes) -> list[object]:
    """The records' JSON values of a file whose header (format, version, a list) is checked."""
    if len(text) > MAX_RECORDS_BYTES:
        raise RecordFormatError(f"records file is over the {MAX_RECORDS_BYTES:,}-byte limit")
    try:
        doc = strict_loads(text)
    except RecursionError:
        raise RecordFormatError("records file is not JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the int digit limit, hooks
        raise RecordFormatError(f"records file is not JSON: {exc}") from None
    doc = _expect_keys(doc, {"format", "version", "records"}, "records file")
    if doc["format"] != RECORD_FORMAT:
        raise RecordFormatError(
            f"records file: format {file_value(doc['format'])} is not {RECORD_FORMAT!r}"
        )
    if doc["version"] != RECORD_VERSION or type(doc["version"]) is not int:
        raise RecordFormatError(
            f"records file version {file_value(doc['version'])} is not supported "
            f"(this runtime reads version {RECORD_VERSION})"
        )
    records = doc["records"]
    if not isinstance(records, list):
        _fail("records file.records", "a list", records)
    return records


@contextlib.contextmanager
def _locked(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive advisory lock on the side file `<records file>.lock` (created, never
    removed: removing it would let two writers lock different files). Every writer here takes it,
    threads included (each call opens its own descriptor), so appends never overwrite each other."""
    import fcntl  # POSIX; imported here so reading records needs nothing beyond the standard set

    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target.with_name(target.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def save_records(path: str | os.PathLike[str], records: Iterable[WarmupRecord]) -> None:
    """Write records atomically (a temp file in the same folder, then a rename), under the lock."""
    text = dumps_records(records)
    check_regular(path)  # a FIFO or device is refused before its side lock file is created
    with _locked(path):
        write_atomically(path, text)


def load_records(path: str | os.PathLike[str]) -> list[WarmupRecord]:
    """Read a records file written by ``save_records`` (no lock needed: writes are atomic)."""
    return loads_records(_read_bytes(path))


def _read_bytes(path: str | os.PathLike[str]) -> bytes:
    """A regular file's bytes, at most the size limit plus one (a FIFO is refused, not waited
    on)."""
    try:
        return read_regular(path, MAX_RECORDS_BYTES)
    except NotARegularFileError as exc:
        raise RecordFormatError(f"records file {exc}") from None


def append_records(path: str | os.PathLike[str], records: Iterable[WarmupRecord]) -> None:
    """Add records to a file (created when missing), atomically and safely from several threads
    and processes at once: load, extend and replace all happen under the file's lock."""
    added = [r.to_json() for r in records]
    check_regular(path)  # as save_records: no side lock file beside a FIFO or device
    with _locked(path):
        if check_regular(path) is None:
            write_atomically(path, _document(added))
            return
        # The file is parsed (so a broken one is refused) but its records are not decoded (each is
        # checked whole when the file is loaded); a file in `dumps_records`' layout grows by text.
        data = _read_bytes(path)
        existing = _records_json(data)
        text = data.decode("utf-8")
        tail = "\n]}\n"
        if existing and text.startswith(_document([])[:-4]) and text.endswith(tail):
            lines = ",\n".join(json.dumps(v, allow_nan=False) for v in added)
            write_atomically(path, f"{text[: -len(tail)]},\n{lines}{tail}" if added else text)
        else:
            write_atomically(path, _document([*existing, *added]))
