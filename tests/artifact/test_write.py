"""The writer's objects are what the reader accepts, key for key."""

from __future__ import annotations

import json
from fractions import Fraction

from artifact import write
from artifact.document import parse_artifact
from artifact.ir import ComponentUse, SourceDecl


def a_document() -> write.JsonObject:
    where = (0, 1, 1, 1, 5)
    steps = write.param("steps", "int", 4, 1, None, where)
    half = write.node("div", [write.ref("param", "steps"), write.number(Fraction(2))])
    let = write.let("half", half, where)
    one = write.field(write.number(Fraction(1)), None)
    memory = write.field(
        write.add_all([write.ref("let", "half"), write.number(Fraction(1, 3))]),
        where,
        [
            write.field(write.ref("let", "half"), where),
            write.field(write.number(Fraction(1, 3)), where),
        ],
    )
    fields = {
        "iterations": write.field(write.ref("param", "steps"), where),
        "memory": memory,
        "time": one,
    }
    stage = write.stage("denoise", where, fields, [ComponentUse("unet", "forward")], True)
    members = {"params": [steps], "contracts": [], "lets": [let], "stages": [stage]}
    pipeline = write.pipeline("p", None, where, members, [("steps",)], {"steps": 2})
    return write.document(("dslc", "0"), [SourceDecl("p.wf", "0" * 64)], [pipeline])


def test_what_the_writer_writes_the_reader_reads() -> None:
    text = write.dumps(a_document())
    (pipeline,) = parse_artifact(json.loads(text)).pipelines
    (stage,) = pipeline.stages
    assert [p.name for p in pipeline.params] == ["steps"] and pipeline.params[0].max is None
    assert len(stage.memory_terms) == 2 and stage.per_step
    assert pipeline.probe_axes == (("steps",),) and text.endswith("}\n") and "\n" not in text[:-1]


def test_keys_keep_the_documented_order() -> None:
    pipelines = a_document()["pipelines"]
    assert isinstance(pipelines, list) and isinstance(pipelines[0], dict)
    pipeline = pipelines[0]
    assert list(pipeline) == [
        "name", "extends", "span", "params", "contracts", "lets", "stages", "probe_axes",
        "probe_minimums",
    ]  # fmt: skip
    assert list(write.param("on", "bool", True, None, None, None)) == [
        "name", "type", "default", "span",
    ]  # fmt: skip
