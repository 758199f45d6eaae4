"""Reading untrusted files does not depend on the caller: a deep stack loads what a shallow one
does; a FIFO, a device or a link to one is refused before it is read; a save that will be refused
leaves no side lock file behind."""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from artifact.atomic import NotARegularFileError
from artifact.document import MAX_DEPTH
from artifact.strict_json import read_regular, strict_loads
from runtime import ArtifactError, load_formulas
from runtime.record import WarmupRecord, append_records, save_records
from tests.artifact.test_document import nested

from .builders import one_stage

T = TypeVar("T")


def frames_deep(depth: int, work: Callable[[], T]) -> T:
    """``work()`` called ``depth`` Python frames below here."""
    return work() if depth == 0 else frames_deep(depth - 1, work)


DEEPEST = json.dumps(one_stage(memory=nested(MAX_DEPTH - 1)))  # valid, as deep as allowed


@pytest.mark.parametrize("depth", [0, 600, 900])
def test_a_valid_deep_artifact_loads_from_any_stack_depth(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "deep.json"
    path.write_text(DEEPEST)
    for source in (DEEPEST, path):
        book = frames_deep(depth, lambda source=source: load_formulas(source))  # type: ignore[misc]
        assert book["p"].memory("S", steps=3) == 3


@pytest.mark.parametrize("depth", [0, 600])
def test_json_too_deep_for_any_stack_is_still_refused(depth: int) -> None:
    text = '{"k": "neg", "args": [' * 5000 + '{"k": "int", "v": 1}' + "]}" * 5000
    doc_text = DEEPEST.replace('{"k": "param", "name": "steps"}', text, 1)
    with pytest.raises(ArtifactError, match="nested too deeply"):
        frames_deep(depth, lambda: load_formulas(doc_text))


def test_strict_loads_deep_caller_still_refuses_duplicate_keys() -> None:
    with pytest.raises(ValueError, match="duplicate key"):
        frames_deep(700, lambda: strict_loads("[" * 600 + '{"a": 1, "a": 2}' + "]" * 600))


def test_read_regular_refuses_a_fifo_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "cal.json"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFileError, match="a FIFO"):
        read_regular(fifo, 100)  # O_NONBLOCK: no writer needed to return


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_read_regular_refuses_a_device_and_a_link_to_it(tmp_path: Path, device: str) -> None:
    link = tmp_path / "cal.json"
    link.symlink_to(device)
    tracemalloc.start()
    try:
        for path in (Path(device), link):
            with pytest.raises(NotARegularFileError, match="a device"):
                read_regular(path, 1 << 30)
        assert tracemalloc.get_traced_memory()[1] < 1 << 20  # nothing was read
    finally:
        tracemalloc.stop()


def test_read_regular_reads_at_most_one_byte_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"x" * 5000)
    assert read_regular(path, 100) == b"x" * 101
    assert read_regular(path, 10_000) == b"x" * 5000


def _record() -> WarmupRecord:
    return WarmupRecord(
        pipeline="p",
        device="cpu",
        backend="cpu-live-tensors",
        params={"steps": 1},
        error=None,
        baseline_allocated=0,
        peak_allocated=1,
        peak_reserved=1,
        duration_s=0.0,
    )


@pytest.mark.parametrize("write", [save_records, append_records])
def test_saving_onto_a_fifo_creates_no_lock_file(tmp_path: Path, write: Callable) -> None:
    fifo = tmp_path / "records.json"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFileError, match="a FIFO"):
        write(fifo, [_record()])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.json"]
