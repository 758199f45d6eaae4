"""`calibration.plan.saved`: a `dslc plan --json` document read back to the plan it says, and every
hostile file refused as a `PlanFileError` naming the file, the place in it and the fix."""

from __future__ import annotations

import copy
import json
import os
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from artifact.limits import MAX_PLAN_CANDIDATES
from calibration.core.offload import Offload, placing
from calibration.errors import CalibrationError
from calibration.plan import Component, Device, Phase, Target, solve
from calibration.plan.document_check import MAX_DOCUMENT_BYTES, _validator
from calibration.plan.report import document
from calibration.plan.saved import FIX, MAX_PLAN_OBJECTS, PlanFileError, SavedPlan, read_plan
from tests.calibration.plan.test_properties import problems

COMPONENTS = [
    Component("text_encoder", 900),
    Component("transformer", 1000, (200, 200, 200, 200), ("b.0", "b.1", "b.2", "b.3")),
    Component("vae", 100),
]
TARGET = Target(
    "t",
    [
        Phase("text", 50, ["text_encoder"]),
        Phase("denoise", 100, ["transformer"]),
        Phase("decode", 300, ["vae"]),
    ],
    layer_uses={"transformer": (2, 2, 2, 2)},
)


def _plan(capacity: int):
    plan = solve(COMPONENTS, [TARGET], Device(capacity, reserve_bytes=0))
    assert plan.feasible, plan.reason
    return plan


def _written(tmp_path: Path, doc: object, name: str = "plan.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _placements(plan) -> list[tuple[str, str, int, tuple[int, ...]]]:
    return [(p.component, p.kind.value, p.layers, p.resident_layers) for p in plan.placements]


@pytest.mark.parametrize("capacity", [2500, 1900, 1500, 1200, 1100])
def test_a_real_plan_comes_back_as_it_was_written(tmp_path, capacity):
    plan = _plan(capacity)
    saved = read_plan(_written(tmp_path, document(plan, COMPONENTS)))
    assert saved.plan.placements == plan.placements
    assert document(saved.plan)["components"] == document(plan)["components"]
    assert (saved.plan.transfer_bytes, saved.plan.pinned_bytes) == (
        plan.transfer_bytes,
        plan.pinned_bytes,
    )
    assert saved.plan.device.usable_bytes == plan.device.usable_bytes
    assert str(saved) == f"plan:{tmp_path / 'plan.json'}"


def test_the_plans_of_every_kind_round_trip(tmp_path):
    kinds = {k for c in (1900, 1200) for _, k, _, _ in _placements(_plan(c))}
    assert kinds == {"resident", "offloaded", "layerwise"}
    saved = read_plan(_written(tmp_path, document(_plan(1900), COMPONENTS)))
    assert saved.placement()["transformer"] == "layerwise 2/4"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(problems())
def test_document_then_read_is_the_same_placement(tmp_path, problem):
    components, targets, device = problem
    plan = solve(components, targets, device)
    path = _written(tmp_path, document(plan, components))
    if not plan.feasible:
        with pytest.raises(PlanFileError, match="feasible: false"):
            read_plan(path)
        return
    saved = read_plan(path)
    assert _placements(saved.plan) == _placements(plan)
    assert document(saved.plan)["components"] == document(plan)["components"]


def _doc() -> dict:
    return copy.deepcopy(document(_plan(1900), COMPONENTS))  # resident and layerwise


def _edited(edit) -> dict:
    doc = _doc()
    edit(doc)
    return doc


BAD = [
    (lambda d: d.update(version=2), "version 2 is not supported"),
    (lambda d: d.pop("components"), "missing key 'components'"),
    (lambda d: d["components"][0].update(layers="two"), "components[0].layers: expected integer"),
    (lambda d: d["components"][1].update(placement="sideways"), "components[1].placement: 'sid"),
    (lambda d: d["components"][1].update(placement="RESIDENT"), "is not one of 'resident'"),
    (lambda d: d["components"][0].update(name=7), "components[0].name: expected string"),
    (lambda d: d["components"][2].update(resident_layers=[0]), "components[2].resident_layers:"),
    (lambda d: d["components"][1].update(layers=-1), "components[1].layers: must be a number >="),
    (lambda d: d["components"][0].update(device_bytes=2**70), "components[0].device_bytes: mus"),
    (lambda d: d.update(feasible="yes"), "feasible: expected boolean"),
    (lambda d: d.update(feasible=False), "feasible: false"),
    (lambda d: d["device"].update(bandwidth_bytes_per_s=0), "device.bandwidth_bytes_per_s: must"),
    (lambda d: d["device"].update(pageable_factor=0.5), "device.pageable_factor: must be"),
    (lambda d: d.update(components=d["components"] * 2), "again (components[0])"),
    (lambda d: d.update(components={}), "components: expected array, got object"),
    (
        lambda d: d.update(components=[dict(d["components"][0], name=f"c{i}") for i in range(257)]),
        "components: 257; a plan places at most 256 (MAX_PLAN_COMPONENTS)",
    ),
    (lambda d: d["components"][1].update(layers=4097), "components[1].layers: 4,097; a plan"),
    # integral floats: JSON Schema counts 1.0 as an integer; every reader would index with it
    (
        lambda d: d["components"][1].update(resident_layers=[0, 1.0]),
        "components[1].resident_layers[1]: expected integer, got number 1.0",
    ),
    (
        lambda d: d["components"][1].update(layers=4.0),
        "components[1].layers: expected integer, got number 4.0",
    ),
    (
        lambda d: d["components"][0].update(device_bytes=900.0),
        "components[0].device_bytes: expected integer, got number 900.0",
    ),
    (
        lambda d: d["device"].update(capacity_bytes=1900.0),
        "device.capacity_bytes: expected integer, got number 1900.0",
    ),
    (
        lambda d: d["device"].update(reserve_bytes=0.0),
        "device.reserve_bytes: expected integer or null, got number 0.0",
    ),
    (lambda d: d.update(transfer_bytes=0.0), "transfer_bytes: expected integer, got number 0.0"),
    (lambda d: d.update(version=1.0), "version: expected integer, got number 1.0"),  # as the rest
    (lambda d: d.update(version=True), "version True is not supported"),
]


@pytest.mark.parametrize(("edit", "message"), BAD)
def test_a_wrong_document_names_the_file_and_the_place(tmp_path, edit, message):
    path = _written(tmp_path, _edited(edit))
    with pytest.raises(PlanFileError) as caught:
        read_plan(path)
    text = str(caught.value)
    assert text.startswith(f"plan file {path}"), text
    assert message in text and text.endswith(FIX), text
    assert isinstance(caught.value, CalibrationError) and isinstance(caught.value, ValueError)


def test_layer_indices_out_of_range_or_out_of_order(tmp_path):
    doc = _doc()
    layered = next(i for i, c in enumerate(doc["components"]) if c["placement"] == "layerwise")
    for kept in ([9], [1, 1], [2, 0]):
        doc["components"][layered]["resident_layers"] = kept
        with pytest.raises(PlanFileError, match=rf"components\[{layered}\]\.resident_layers\["):
            read_plan(_written(tmp_path, doc))


HOSTILE = [
    ("not JSON", b"{nope", "not JSON"),
    ("a repeated key", b'{"version": 1, "version": 1}', "duplicate key 'version'"),
    ("NaN", b'{"version": 1, "transfer_s": NaN}', "NaN is not valid JSON"),
    ("Infinity", b'{"version": 1, "transfer_s": -Infinity}', "-Infinity is not valid JSON"),
    ("a list", b"[1, 2]", "a plan document is a JSON object"),
    ("not UTF-8", b'{"version": "\xff"}', "not JSON"),
    ("deeply nested", b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ("huge digits", b'{"version": 1' + b"0" * 5000 + b"}", "not JSON"),
]


@pytest.mark.parametrize(("what", "data", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_file_that_is_not_a_plan_document(tmp_path, what, data, message):
    path = tmp_path / "plan.json"
    path.write_bytes(data)
    with pytest.raises(PlanFileError, match=f"^plan file {path}: .*{message}"):
        read_plan(path)


def test_a_file_too_large_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b'{"version": 1, "pad": "' + b"x" * MAX_DOCUMENT_BYTES + b'"}')
    with pytest.raises(PlanFileError, match=r"over 16,777,216 bytes; a plan document is a few KiB"):
        read_plan(path)


def test_missing_files_directories_and_fifos(tmp_path):
    with pytest.raises(PlanFileError, match=f"^plan file {tmp_path}/nope.json: No such file"):
        read_plan(tmp_path / "nope.json")
    with pytest.raises(PlanFileError, match="is a directory, not a regular file"):
        read_plan(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(PlanFileError, match="not a regular file"):  # refused without blocking
        read_plan(fifo)


def test_a_ranks_document_says_to_save_one_rank(tmp_path):
    path = _written(tmp_path, {"version": 1, "agreement": "common", "ranks": [_doc(), _doc()]})
    with pytest.raises(PlanFileError, match=r"several ranks' plans .*its `ranks\[N\]`"):
        read_plan(path)


def test_a_hand_written_plan_needs_only_what_apply_uses(tmp_path):
    doc = {
        "version": 1,
        "feasible": True,
        "reason": "fits",
        "device": {"capacity_bytes": 1 << 20},
        "components": [
            {"name": "vae", "placement": "resident", "layers": 0, "resident_layers": []},
            {"name": "transformer", "placement": "layerwise", "layers": 2, "resident_layers": [1]},
        ],
    }
    saved = read_plan(_written(tmp_path, doc))
    assert saved.placement() == {"vae": "resident", "transformer": "layerwise 1/2"}
    assert saved.plan.placement("transformer").resident_layers == (1,)


def test_placing_reads_plan_files_and_names_the_rest(tmp_path):
    path = _written(tmp_path, _doc())
    assert placing("model") is Offload.MODEL and placing("auto") is Offload.AUTO
    saved = placing(f"plan:{path}")
    assert isinstance(saved, SavedPlan) and saved.path == str(path)
    with pytest.raises(PlanFileError, match=f"plan file {tmp_path}/missing.json: No such file"):
        placing(f"plan:{tmp_path}/missing.json")


# --------------------------------------------------------------------- counts before any walk


MiB = 1 << 20


def _schema_walks() -> int:
    """How many times a schema check has started (its validator is cached: each check asks once)."""
    info = _validator.cache_info()
    return info.hits + info.misses


def _peak(work) -> int:
    """The peak bytes Python allocated while ``work()`` ran."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _hostile_plan(components: list[dict]) -> dict:
    return {
        "version": 1,
        "feasible": True,
        "reason": "fits",
        "device": {"capacity_bytes": 1 << 20},
        "components": components,
    }


def test_100000_components_are_counted_before_the_schema_walks_them(tmp_path):
    many = [
        {"name": f"c{i}", "placement": "resident", "layers": 0, "resident_layers": []}
        for i in range(100_000)
    ]
    path = _written(tmp_path, _hostile_plan(many))
    walks = _schema_walks()

    def refused() -> None:
        with pytest.raises(PlanFileError, match=r"components: 100,000; a plan places at most 256"):
            read_plan(path)

    assert _peak(refused) < 64 * MiB
    assert _schema_walks() == walks  # refused by the count: the schema never started
    read_plan(_written(tmp_path, _doc(), "good.json"))
    assert _schema_walks() == walks + 1  # (the count above would see a walk)


def test_80_components_of_100000_layers_stop_the_parse_at_the_first(tmp_path):
    component = {
        "name": "c0",
        "placement": "layerwise",
        "layers": 2,
        "resident_layers": [0] * 100_000,
    }
    head = json.dumps(_hostile_plan([component]), separators=(",", ":"))[: -len("]}")]
    path = tmp_path / "layers.json"
    # 79 more such components, then bytes that are not JSON: a parse that went on would say so
    more = "," + json.dumps(dict(component, name="c1"), separators=(",", ":"))
    path.write_text(head + more * 79 + ",{nope")
    assert 15 * MiB < path.stat().st_size < MAX_DOCUMENT_BYTES  # read whole, then parsed
    walks = _schema_walks()

    def refused() -> None:
        with pytest.raises(PlanFileError) as caught:
            read_plan(path)
        text = str(caught.value)
        assert text.startswith(f"plan file {path}: resident_layers of the component 'c0': "), text
        assert "100,000 layer indices; a plan keeps at most 4,096 layers a component" in text

    assert _peak(refused) < 64 * MiB
    assert _schema_walks() == walks


def test_256_components_of_4096_layers_stop_the_parse_past_the_planners_layers_in_all(tmp_path):
    """Each component within MAX_PLAN_LAYERS, 256 of them within MAX_PLAN_COMPONENTS: 1,048,576
    indices the schema took 9 s to walk (issue 39, a variant of 80 x 100,000). The planner weighs
    at most MAX_PLAN_CANDIDATES layers in all, so the parse stops past that many indices."""
    assert 4 * 4096 == MAX_PLAN_CANDIDATES
    component = {
        "name": "c0",
        "placement": "layerwise",
        "layers": 4096,
        "resident_layers": list(range(4096)),
    }
    head = json.dumps(_hostile_plan([component]), separators=(",", ":"))[: -len("]}")]
    more = [json.dumps(dict(component, name=f"c{i}"), separators=(",", ":")) for i in range(1, 256)]
    path = tmp_path / "layers.json"
    path.write_text(head + "," + ",".join(more) + ",{nope")  # a parse that went on would say so
    walks = _schema_walks()

    def refused() -> None:
        with pytest.raises(PlanFileError) as caught:
            read_plan(path)
        text = str(caught.value)
        assert text.startswith(f"plan file {path}: resident_layers of the component 'c4': "), text
        assert "20,480 layer indices in all so far; a plan's components have at most 16,384" in text

    assert _peak(refused) < 64 * MiB
    assert _schema_walks() == walks


def test_a_plan_of_the_planners_most_layers_in_all_is_read(tmp_path):
    components = [  # 4 x 4,096 = 16,384 indices in all, no more
        {
            "name": f"c{i}",
            "placement": "layerwise",
            "layers": 4096,
            "resident_layers": list(range(4095)),
            "pinned_layers": [4095],
        }
        for i in range(4)
    ]
    saved = read_plan(_written(tmp_path, _hostile_plan(components)))
    kept = sum(len(p.resident_layers) + len(p.pinned_layers) for p in saved.plan.placements)
    assert kept == MAX_PLAN_CANDIDATES


def test_a_million_empty_objects_stop_the_parse_past_the_objects_a_plan_holds(tmp_path):
    """3 MB of `{}` as components: the parse held them all (76 MiB, 0.5 s) before the count
    refused them (issue 39, a variant of 100,000 components); it stops past MAX_PLAN_OBJECTS."""
    head = json.dumps(_hostile_plan([]), separators=(",", ":"))[: -len("]}")]
    path = tmp_path / "empty.json"
    path.write_text(head + ",".join(["{}"] * 1_000_000) + "]}")
    walks = _schema_walks()

    def refused() -> None:
        with pytest.raises(PlanFileError, match=f"more than {MAX_PLAN_OBJECTS:,} JSON objects"):
            read_plan(path)

    assert _peak(refused) < 16 * MiB
    assert _schema_walks() == walks
