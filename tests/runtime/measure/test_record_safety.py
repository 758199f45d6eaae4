"""Records files: every malformed file is a RecordFormatError; concurrent appends lose nothing."""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.record import (
    RecordFormatError,
    WarmupRecord,
    append_records,
    dumps_records,
    load_records,
    loads_records,
)


def record(pipeline: str, index: int) -> WarmupRecord:
    """A small record that names its writer and its position in that writer's sequence."""
    return WarmupRecord(
        pipeline=pipeline,
        device="cpu",
        backend="cpu-live-tensors",
        params={"steps": index},
        error=None,
        baseline_allocated=0,
        peak_allocated=index,
        peak_reserved=index,
        duration_s=0.0,
    )


GOOD = dumps_records([record("p", 1)])


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"\xff\xfe" + GOOD.encode(), "not JSON"),  # not UTF-8
        (GOOD.replace('"steps": 1', '"steps": ' + "7" * 5000).encode(), "not JSON"),  # digits
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),  # nesting
        (GOOD.replace('"pipeline": "p"', '"pipeline": "p", "pipeline": "q"').encode(), "duplicate"),
        (GOOD.replace('"records": [', '"records": [], "records": [').encode(), "duplicate"),
        (GOOD.replace('"duration_s": 0.0', '"duration_s": NaN').encode(), "NaN"),
    ],
    ids=["not-utf8", "5000-digits", "deep", "duplicate-field", "duplicate-header", "nan"],
)
def test_malformed_files_are_record_format_errors(tmp_path: Path, data: bytes, fragment: str):
    path = tmp_path / "records.json"
    path.write_bytes(data)
    with pytest.raises(RecordFormatError, match=fragment):
        load_records(path)
    with pytest.raises(RecordFormatError, match=fragment):
        loads_records(data)


def test_the_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "records.json"
    path.write_text(GOOD)
    assert load_records(path) == [record("p", 1)]


def test_a_huge_wrong_value_is_named_briefly() -> None:
    doc = json.loads(GOOD)
    doc["records"][0]["phases"] = {"x": "y" * 10_000}
    with pytest.raises(RecordFormatError) as err:
        loads_records(json.dumps(doc))
    assert "record.phases: expected a list" in str(err.value)
    assert len(str(err.value)) < 200


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "records.json"
    os.mkfifo(fifo)
    with pytest.raises(RecordFormatError, match="a FIFO, not a regular file"):
        load_records(fifo)


WRITERS, APPENDS = 4, 200


@pytest.fixture
def shared_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder in memory (/dev/shm) where there is one: the test is about locking, and 800 fsyncs
    on a busy disk take seconds each run; elsewhere pytest's tmp_path."""
    if not os.path.isdir("/dev/shm"):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir="/dev/shm") as folder:
        yield Path(folder)


def _append_many(path: str, writer: int, appends: int = APPENDS) -> None:
    """One writer's appends, one record per call (the worst case for lost updates)."""
    for index in range(appends):
        append_records(path, [record(f"w{writer}", index)])


def _written(path: Path) -> dict[str, list[int]]:
    """Each writer's record indices, in file order."""
    found: dict[str, list[int]] = {}
    for r in load_records(path):
        found.setdefault(r.pipeline, []).append(int(r.params["steps"]))
    return found


def test_concurrent_appends_from_processes_keep_every_record(shared_dir: Path) -> None:
    path = shared_dir / "records.json"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append_many, args=(str(path), w)) for w in range(WRITERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * WRITERS
    # every record of every writer, each writer's in its own order
    assert _written(path) == {f"w{w}": list(range(APPENDS)) for w in range(WRITERS)}


def test_concurrent_appends_from_threads_keep_every_record(shared_dir: Path) -> None:
    path = shared_dir / "records.json"
    threads = [
        threading.Thread(target=_append_many, args=(str(path), w, 50)) for w in range(WRITERS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _written(path) == {f"w{w}": list(range(50)) for w in range(WRITERS)}


def test_appends_through_a_symlink_keep_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(real)
    append_records(link, [record("p", 1)])
    append_records(link, [record("p", 2)])
    assert link.is_symlink()
    assert load_records(real) == [record("p", 1), record("p", 2)]
