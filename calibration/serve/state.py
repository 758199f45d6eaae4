"""Warm start: what a worker's measurements depend on (``Fingerprint``), and the state folder that
keeps them between starts (``StateFolder``: fingerprint, records, calibration, plan, and the
served points the predictor learned from).

Every file is written atomically (a temp file, then ``os.replace``) and read back within a size
bound; anything unreadable is a ``StaleState`` saying why, which the worker answers by calibrating
again (docs/serving.md, "The state folder"), never by failing to start.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from attrs import asdict, fields, frozen

from artifact.atomic import write_atomically
from artifact.strict_json import read_regular, strict_loads
from runtime.record import RecordFormatError, WarmupRecord, dumps_records, loads_records

FINGERPRINT = "fingerprint.json"
RECORDS = "records.json"
SERVED = "served.json"
LEARNED = "learned.json"  # the served points in the fit (``calibration.serve.learn.History``)
CALIBRATION = "calibration.json"
PLAN = "plan.json"
#: The most a fingerprint, calibration or plan file may hold; records have their own limit.
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
MAX_RECORDS_BYTES = 64 * 1024 * 1024
#: The served records kept (the newest), so the folder stays bounded under any traffic.
MAX_SERVED = 1_000
VERSION = 1


class StaleState(Exception):
    """The state folder cannot warm-start this worker: the message says which part, or why."""


@frozen
class Fingerprint:
    """What the stored measurements depend on; any field that differs means calibrating again."""

    components: Mapping[str, str]  # component -> sha256 of its parameters' names, shapes, dtypes
    formulas: str  # sha256 of the compiled formulas' sources, with the pipeline's name
    torch: str
    diffusers: str
    device: str  # the device's kind (cpu, or cuda and its name)
    capacity: int | None  # the cap the worker plans for, in bytes

    def changes(self, other: Fingerprint) -> tuple[str, ...]:
        """The parts that differ from ``other`` (component names spelt ``component NAME``)."""
        out = [f.name for f in fields(Fingerprint) if f.name != "components"]
        out = [name for name in out if getattr(self, name) != getattr(other, name)]
        names = sorted(set(self.components) | set(other.components))
        moved = [
            f"component {n}" for n in names if self.components.get(n) != other.components.get(n)
        ]
        return (*moved, *out)

    def document(self) -> dict[str, object]:
        return {"version": VERSION, **asdict(self, value_serializer=None)}

    @classmethod
    def from_document(cls, value: object) -> Fingerprint:
        """A fingerprint read back; ``StaleState`` for anything but what ``document`` writes."""
        if not isinstance(value, dict) or value.get("version") != VERSION:
            raise StaleState("the fingerprint is not this version's")
        parts = {k: v for k, v in value.items() if k != "version"}
        comps = parts.get("components")
        texts = ("formulas", "torch", "diffusers", "device")
        ok = (
            set(parts) == {f.name for f in fields(Fingerprint)}
            and isinstance(comps, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in comps.items())
            and all(isinstance(parts[k], str) for k in texts)
            and (parts["capacity"] is None or type(parts["capacity"]) is int)
        )
        if not ok:
            raise StaleState("the fingerprint's fields are not what a worker writes")
        return cls(**parts)  # type: ignore[arg-type]  # each field checked above


def component_digest(named: Iterable[tuple[str, object]]) -> str:
    """sha256 of each tensor's name, shape and dtype (never its values: a fingerprint is cheap)."""
    digest = hashlib.sha256()
    for name, tensor in named:
        shape = tuple(getattr(tensor, "shape", ()))
        digest.update(f"{name}:{shape}:{getattr(tensor, 'dtype', '')}\n".encode())
    return digest.hexdigest()


def formulas_digest(paths: Sequence[Path], pipeline: str) -> str:
    """sha256 of the formula files (each path and its bytes, in order) and the pipeline's name."""
    digest = hashlib.sha256(pipeline.encode())
    for path in paths:
        digest.update(f"\0{path.name}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@frozen
class Stored:
    """What a state folder held: the fingerprint and the calibration's records, in order."""

    fingerprint: Fingerprint
    records: tuple[WarmupRecord, ...]


class StateFolder:
    """One worker's state folder (``--state DIR``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self) -> Stored:
        """The fingerprint and records; ``StaleState`` when either is missing or unreadable."""
        doc = self._json(FINGERPRINT)
        fingerprint = Fingerprint.from_document(doc)
        data = self._bytes(RECORDS, MAX_RECORDS_BYTES)
        try:
            records = tuple(loads_records(data))
        except RecordFormatError as exc:
            raise StaleState(f"{RECORDS}: {exc}") from None
        if not records:
            raise StaleState(f"{RECORDS} holds no records")
        return Stored(fingerprint, records)

    def write(
        self,
        fingerprint: Fingerprint,
        records: Sequence[WarmupRecord],
        calibration: Mapping[str, object] | None = None,
        plan: Mapping[str, object] | None = None,
    ) -> None:
        """Every file atomically; the fingerprint last, so a folder cut short reads as stale."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / FINGERPRINT).unlink(missing_ok=True)
        write_atomically(self.root / RECORDS, dumps_records(records))
        for name, doc in ((CALIBRATION, calibration), (PLAN, plan)):
            if doc is not None:
                write_atomically(self.root / name, json.dumps(doc, indent=1, allow_nan=False))
        write_atomically(self.root / FINGERPRINT, json.dumps(fingerprint.document(), indent=1))

    def flush_served(self, records: Sequence[WarmupRecord]) -> None:
        """The newest ``MAX_SERVED`` served records, atomically (at shutdown)."""
        self.root.mkdir(parents=True, exist_ok=True)
        write_atomically(self.root / SERVED, dumps_records(records[-MAX_SERVED:]))

    def write_learned(self, records: Sequence[WarmupRecord]) -> None:
        """The served points the predictor in force was fitted with, atomically."""
        self.root.mkdir(parents=True, exist_ok=True)
        write_atomically(self.root / LEARNED, dumps_records(records))

    def read_learned(self) -> tuple[WarmupRecord, ...]:
        """The served points written before (none when there is no file); ``StaleState`` when
        the file is unreadable or over its limit."""
        if not (self.root / LEARNED).exists():
            return ()
        try:
            return tuple(loads_records(self._bytes(LEARNED, MAX_RECORDS_BYTES)))
        except RecordFormatError as exc:
            raise StaleState(f"{LEARNED}: {exc}") from None

    def forget_learned(self) -> None:
        """A new calibration: the points served under the one before are not its evidence."""
        with contextlib.suppress(OSError):  # unreadable later, or not this calibration's: refused
            (self.root / LEARNED).unlink(missing_ok=True)

    def _bytes(self, name: str, limit: int) -> bytes:
        try:
            data = read_regular(self.root / name, limit)
        except OSError as exc:
            raise StaleState(f"{name}: {exc.strerror or exc}") from None
        if len(data) > limit:
            raise StaleState(f"{name} is over its {limit:,}-byte limit")
        return data

    def _json(self, name: str) -> object:
        data = self._bytes(name, MAX_DOCUMENT_BYTES)
        try:
            return strict_loads(data)
        except (ValueError, RecursionError) as exc:
            raise StaleState(f"{name} is not JSON: {str(exc)[:200]}") from None
