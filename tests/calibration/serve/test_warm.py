"""Warm start (calibration.serve.warm): a second start with the same state folder replays the
stored calibration (no probe runs: the recorder sees fewer requests), a changed fingerprint part or
a corrupt folder calibrates again, saying why."""

from __future__ import annotations

import attrs
import pytest

from calibration.lifecycle.steps import Settings
from calibration.serve.state import FINGERPRINT, RECORDS, StateFolder
from calibration.serve.warm import Started, fingerprint_of, start
from tests.calibration.lifecycle_setup import STREAMING, points, session


def _start(folder: StateFolder, **changed: object) -> tuple[Started, int]:
    fresh, _ = session()
    settings = Settings(STREAMING, "apply", repeat=1)
    print_ = fingerprint_of(fresh, "formulas-sha", STREAMING.capacity_bytes)
    started = start(fresh, points(), settings, folder, attrs.evolve(print_, **changed))  # type: ignore[arg-type]
    ran = len(fresh.recorder.records)
    if started.outcome.applied is not None:
        started.outcome.applied.undo()
    return started, ran


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory) -> tuple[StateFolder, Started, int]:
    folder = StateFolder(tmp_path_factory.mktemp("state"))
    started, ran = _start(folder)
    return folder, started, ran


def test_a_cold_start_writes_the_state_folder(cold):
    folder, started, _ = cold
    assert not started.warm and "not usable" in started.why  # an empty folder: nothing stored
    assert started.outcome.report.validated
    assert {p.name for p in folder.root.iterdir()} >= {
        FINGERPRINT,
        RECORDS,
        "calibration.json",
        "plan.json",
    }
    assert folder.read().records == started.outcome.calibration.records


def test_the_same_fingerprint_skips_the_probes(cold):
    folder, first, ran_cold = cold
    learned = first.outcome.calibration.records[:1]  # served points a worker learned before
    folder.write_learned(learned)
    again, ran_warm = _start(folder)
    assert again.warm and again.why == ""
    assert folder.read_learned() == tuple(learned)  # kept: the same calibration's evidence
    assert again.outcome.report.validated
    calibrated = len(first.outcome.calibration.records)
    assert ran_warm == ran_cold - calibrated  # only the validation and the re-warm ran
    steps = [s.name for s in again.outcome.report.steps]
    assert steps.count("validate") == 1


@pytest.mark.parametrize(
    ("part", "value", "said"),
    [
        ("formulas", "another-sha", "formulas"),
        ("capacity", 2 << 20, "capacity"),
        ("components", {"transformer": "0" * 64}, "component transformer"),
    ],
)
def test_a_changed_part_recalibrates_and_says_which(cold, tmp_path, part, value, said):
    folder, _, ran_cold = cold
    copy = StateFolder(tmp_path)
    for p in folder.root.iterdir():
        (tmp_path / p.name).write_bytes(p.read_bytes())
    copy.write_learned(folder.read().records[:1])
    again, ran = _start(copy, **{part: value})
    assert not again.warm and said in again.why and ran == ran_cold
    assert copy.read_learned() == ()  # the points were another calibration's: forgotten


def test_a_corrupt_folder_recalibrates_with_a_warning(cold, tmp_path, caplog):
    folder, _, ran_cold = cold
    for p in folder.root.iterdir():
        (tmp_path / p.name).write_bytes(p.read_bytes())
    (tmp_path / RECORDS).write_bytes(b'{"format": "warmup-records", "records": [')
    again, ran = _start(StateFolder(tmp_path))
    assert not again.warm and "not usable" in again.why and ran == ran_cold
    assert any("not usable" in r.getMessage() for r in caplog.records)
