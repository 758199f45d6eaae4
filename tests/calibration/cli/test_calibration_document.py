"""`dslc plan --calibration FILE` reads the file strictly and checks it against its schema: every
malformed, hostile or special file is exit 1 naming the file and the place, within a bounded
amount of memory; never exit 3, never a silent drop, never a blocked read."""

from __future__ import annotations

import copy
import json
import os
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.plan.document_check import MAX_DOCUMENT_OBJECTS
from calibration.plan.inputs import MAX_ITEMS
from dslc.cli import cli

from .test_plan import calibration_document

MiB = 1 << 20


def plan_exit(path: Path | str, *extra: str) -> tuple[int, str]:
    """`dslc plan --calibration PATH` through the dslc group (its exit 3 for a bug included)."""
    result = CliRunner().invoke(
        cli, ["plan", "--calibration", str(path), "--device-memory", "80GiB", *extra]
    )
    return result.exit_code, result.output


def bounded(path: Path | str) -> tuple[int, str]:
    """``plan_exit`` with its peak Python allocation checked: a refusal reads nothing big."""
    tracemalloc.start()
    try:
        out = plan_exit(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * MiB
    return out


def _mutated(edit: str) -> dict:
    doc = copy.deepcopy(calibration_document())
    exec(edit, {"doc": doc})  # noqa: S102 - the test's own literal edits, never a file's text
    return doc


CASES = [
    (
        'doc["phases"][1]["active_components"] = "transformer"',
        "phases[1].active_components: expected array, got string 'transformer'",
    ),
    (
        'doc["phases"][0]["active_components"] = ["text_encoder", "nope"]',
        "phases[0].active_components[1]: unknown component 'nope'",
    ),
    (
        'doc["layer_uses"][3]["component"] = "ghost"',
        "layer_uses[3].component: unknown component 'ghost'",
    ),
    ('doc["version"] = 2', "version 2 is not supported"),
    ('doc["version"] = "1"', "version '1' is not supported"),
    ('doc["version"] = 1.0', "version: expected integer, got number 1.0"),  # as every int field
    ('del doc["version"]', "missing key 'version'"),
    (
        'doc["layer_uses"][0]["calls"] = 10 ** 3999',
        "layer_uses[0].calls: must be an int >= 0 and <= 2**63, got <an integer of 13,285 bits>",
    ),
    (
        'doc["component_weight_bytes"]["vae"] = True',
        "component_weight_bytes.vae: expected integer, got boolean True",
    ),
    (
        'doc["phases"][2]["bound_peak_bytes"] = 1.5',
        "phases[2].bound_peak_bytes: expected integer or null",
    ),
    # integral floats: JSON Schema counts 1.0 as an integer; the reader refuses it, named
    (
        'doc["phases"][2]["bound_peak_bytes"] = 1048576.0',
        "phases[2].bound_peak_bytes: expected integer or null, got number 1048576.0",
    ),
    (
        'doc["layer_uses"][0]["calls"] = 2.0',
        "layer_uses[0].calls: expected integer, got number 2.0",
    ),
    ('doc["target"] = {"steps": 2.0}', "target.steps: expected integer or boolean, got number"),
    (
        'doc["layer_bytes"]["transformer"]["blocks.0"] = 1024.0',
        "layer_bytes.transformer.blocks.0: expected integer, got number 1024.0",
    ),
    (
        'doc["measured_weights_bytes"] = 0.0',
        "measured_weights_bytes: expected integer or null, got number 0.0",
    ),
    ('doc["phases"] = {}', "phases: expected array, got object"),
    ('doc["target"] = [1]', "target: expected object or string or null"),
    (
        'doc["layer_bytes"]["transformer"]["blocks.0"] = -1',
        "layer_bytes.transformer.blocks.0: must be an int >= 0",
    ),
]


@pytest.mark.parametrize(("edit", "message"), CASES, ids=[c[0] for c in CASES])
def test_a_malformed_document_is_exit_1_naming_the_place(tmp_path, edit, message):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(_mutated(edit)))
    code, output = bounded(path)
    assert code == 1, output
    assert f"calibration document {path}: {message}" in output, output


def test_the_unmodified_document_plans(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(calibration_document()))
    assert plan_exit(path)[0] == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"version": 1, "version": 1}', "duplicate key 'version'"),
        ('{"version": ' + "9" * 5000 + "}", "Exceeds the limit (4300 digits)"),
        ('{"version": NaN}', "NaN is not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('["a"]', "a calibration document is a JSON object"),
        ("\xff", "not JSON"),
    ],
)
def test_json_the_strict_reader_refuses(tmp_path, text, message):
    path = tmp_path / "cal.json"
    path.write_text(text, encoding="latin-1")
    code, output = bounded(path)
    assert code == 1 and message in output and str(path) in output, output


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "cal.json"
    os.mkfifo(fifo)
    code, output = plan_exit(fifo)
    assert code == 1 and f"{fifo} is a FIFO, not a regular file" in output, output


@pytest.mark.parametrize("link", [False, True])
def test_dev_zero_is_refused_before_reading(tmp_path, link):
    path: Path | str = "/dev/zero"
    if link:
        path = tmp_path / "cal.json"
        path.symlink_to("/dev/zero")
    code, output = bounded(path)
    assert code == 1 and "is a device, not a regular file" in output, output


def test_an_oversized_file_is_refused_by_what_was_read(tmp_path):
    path = tmp_path / "cal.json"
    path.write_bytes(b" " * (16 * MiB + 1))
    code, output = bounded(path)
    assert code == 1 and "over 16,777,216 bytes" in output, output


def test_a_million_empty_phases_stop_the_parse_past_the_objects_a_document_holds(tmp_path):
    """3 MB of `{}` as phases: the parse held them all (113 MB, then the schema's item limit
    refused them) before the count (issue 39); it stops past MAX_DOCUMENT_OBJECTS, which still
    holds the largest list the planner reads (MAX_ITEMS records, each with its params)."""
    path = tmp_path / "cal.json"
    head = '{"version": 1, "component_weight_bytes": {}, "phases": ['
    path.write_text(head + ",".join(["{}"] * 1_000_000) + "]}")
    tracemalloc.start()
    try:
        code, output = plan_exit(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 1 and f"more than {MAX_DOCUMENT_OBJECTS:,} JSON objects" in output, output
    assert peak < 40 * MiB
    assert MAX_DOCUMENT_OBJECTS > 2 * MAX_ITEMS + 1_000
