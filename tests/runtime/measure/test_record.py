"""WarmupRecord: exact versioned JSON round trip (property-tested) and atomic files."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import record as rec
from runtime.levels import MAX_WEIGHT_LEVELS
from runtime.record import (
    ErrorInfo,
    Iteration,
    LayerUse,
    Phase,
    RecordFormatError,
    StageIterations,
    WarmupRecord,
    dumps_records,
    load_records,
    loads_records,
    save_records,
)

names = st.text(max_size=12)
sizes = st.integers(min_value=0, max_value=1 << 70)
seconds = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
components = st.lists(names, max_size=3).map(tuple)

phases = st.builds(
    Phase,
    kind=names,
    name=names,
    stage=st.none() | names,
    count=sizes,
    allocated_before=sizes,
    peak_allocated=sizes,
    peak_reserved=sizes,
    duration_s=seconds,
    active_components=components,
    used_components=components,
    weight_levels=st.none()
    | st.lists(st.tuples(sizes, sizes), max_size=MAX_WEIGHT_LEVELS).map(tuple),
)
iterations = st.builds(
    Iteration,
    stage=names,
    index=sizes,
    peak_allocated=sizes,
    peak_reserved=sizes,
    duration_s=seconds,
)
pairs = st.builds(
    StageIterations,
    stage=names,
    measured=sizes,
    target=sizes,
    source=st.sampled_from(rec.ITERATION_SOURCES),
)
uses = st.builds(LayerUse, component=names, layer=names, stage=st.none() | names, calls=sizes)
records = st.builds(
    WarmupRecord,
    pipeline=names,
    device=names,
    backend=names,
    params=st.dictionaries(names, st.integers(-(1 << 40), 1 << 40) | st.booleans(), max_size=5),
    error=st.none() | st.builds(ErrorInfo, type=names, message=st.text(max_size=40)),
    baseline_allocated=sizes,
    peak_allocated=sizes,
    peak_reserved=sizes,
    duration_s=seconds,
    phases=st.lists(phases, max_size=4),
    iterations=st.lists(iterations, max_size=4),
    stage_iterations=st.lists(pairs, max_size=3),
    layer_uses=st.lists(uses, max_size=4),
)


def _simple() -> WarmupRecord:
    return WarmupRecord(
        pipeline="p",
        device="cpu",
        backend="cpu-live-tensors",
        params={"steps": 2, "cfg": True},
        error=None,
        baseline_allocated=10,
        peak_allocated=30,
        peak_reserved=30,
        duration_s=0.5,
        phases=[
            Phase(
                "stage",
                "DenoisingStage",
                "DenoisingStage",
                1,
                10,
                30,
                30,
                0.25,
                ("transformer",),
                (),
            )
        ],
        iterations=[Iteration("DenoisingStage", 0, 30, 30, 0.1)],
        stage_iterations=[StageIterations("DenoisingStage", 2, 40, "counted")],
        layer_uses=[
            LayerUse("transformer", "blocks.0", "DenoisingStage", 4),
            LayerUse("transformer", "blocks.0", None, 1),
        ],
    )


@settings(max_examples=150, deadline=None)
@given(records)
def test_json_round_trip_is_exact(record: WarmupRecord) -> None:
    assert WarmupRecord.from_json(record.to_json()) == record
    # ... and through the JSON text, where bool stays bool and floats keep every bit.
    again = WarmupRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record
    assert [type(v) for v in again.params.values()] == [type(v) for v in record.params.values()]
    assert [p.duration_s for p in again.phases] == [p.duration_s for p in record.phases]


def test_pickle_round_trip() -> None:
    import pickle

    assert pickle.loads(pickle.dumps(_simple())) == _simple()


@settings(max_examples=30, deadline=None)
@given(st.lists(records, max_size=3))
def test_file_text_round_trip(batch: list[WarmupRecord]) -> None:
    assert loads_records(dumps_records(batch)) == batch


def test_record_is_frozen_and_hashable() -> None:
    record = _simple()
    with pytest.raises(AttributeError):
        record.peak_allocated = 0  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.params["steps"] = 3  # type: ignore[index]
    assert hash(record) == hash(_simple())


def test_derived_views() -> None:
    record = _simple()
    assert record.ok and record.peak_above_baseline == 20
    assert record.stage_durations == {"DenoisingStage": 0.25}
    assert record.iteration_pairs() == {"DenoisingStage": (2, 40)}
    assert record.layer_totals() == {("transformer", "blocks.0"): 5}


def test_error_info_keeps_strings_only() -> None:
    info = ErrorInfo.from_exception(MemoryError("boom"))
    assert info == ErrorInfo("MemoryError", "boom")
    import torch

    assert ErrorInfo.from_exception(torch.OutOfMemoryError("x")).type == "torch.OutOfMemoryError"


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda d: d.update(version=2), "version 2 is not supported"),
        (lambda d: d.update(version=True), "version True"),
        (lambda d: d.pop("phases"), "missing keys ['phases']"),
        (lambda d: d.update(extra=1), "unexpected keys ['extra']"),
        (
            lambda d: d.update(peak_allocated=-1),
            "record.peak_allocated: expected a non-negative integer",
        ),
        (lambda d: d.update(peak_allocated=True), "record.peak_allocated"),
        (lambda d: d.update(duration_s=float("nan")), "record.duration_s"),
        (lambda d: d.update(params={"steps": 1.5}), "record.params"),
        (lambda d: d["phases"][0].update(count="1"), "record.phases[0].count"),
        (lambda d: d["phases"][0].pop("kind"), "record.phases[0]: missing keys ['kind']"),
        (lambda d: d.update(error={"type": "E"}), "record.error: missing keys ['message']"),
        (
            lambda d: d["phases"][0].update(weight_levels=[[1, 2]] * (MAX_WEIGHT_LEVELS + 1)),
            f"record.phases[0].weight_levels: expected null or at most {MAX_WEIGHT_LEVELS}",
        ),
        (lambda d: d["phases"][0].update(weight_levels=[[1, -2]]), "weight_levels: expected"),
        (lambda d: d["phases"][0].update(weight_levels=[[1, 2, 3]]), "weight_levels: expected"),
        (lambda d: d["phases"][0].update(weight_levels=[[1, True]]), "weight_levels: expected"),
    ],
)
def test_from_json_refuses_malformed(mutate, fragment) -> None:
    doc = _simple().to_json()
    mutate(doc)
    with pytest.raises(RecordFormatError) as err:
        WarmupRecord.from_json(doc)
    assert fragment in str(err.value)


def test_a_record_without_weight_levels_still_loads() -> None:
    doc = _simple().to_json()
    phases = doc["phases"]
    assert isinstance(phases, list)
    assert phases[0].pop("weight_levels") is None  # written before they existed
    assert WarmupRecord.from_json(doc) == _simple()


def test_file_header_checked() -> None:
    good = json.loads(dumps_records([_simple()]))
    for key, value, fragment in [
        ("format", "other", "format 'other'"),
        ("version", 9, "version 9"),
    ]:
        with pytest.raises(RecordFormatError, match=fragment):
            loads_records(json.dumps({**good, key: value}))
    with pytest.raises(RecordFormatError, match="not JSON"):
        loads_records("{")


def test_save_and_load(tmp_path) -> None:
    path = tmp_path / "records.json"
    save_records(path, [_simple(), _simple()])
    assert load_records(path) == [_simple(), _simple()]
    rec.append_records(path, [_simple()])
    assert len(load_records(path)) == 3
    # no temp file left behind; the side lock file stays (removing it would race with writers)
    assert sorted(os.listdir(tmp_path)) == ["records.json", "records.json.lock"]


def test_save_is_atomic_when_replace_fails(tmp_path, monkeypatch) -> None:
    path = tmp_path / "records.json"
    save_records(path, [_simple()])
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(rec.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        save_records(path, [_simple(), _simple()])
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["records.json", "records.json.lock"]
