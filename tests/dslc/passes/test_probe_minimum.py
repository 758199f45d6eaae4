"""A declared minimum probe (`probe frames >= 9`): parsed, formatted, inherited, emitted, and
validated by the loader (`Pipeline.probe_minimums`)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from dslc.compiler import compile_text
from dslc.emit import artifact, dumps
from dslc.fmt import format_source
from dslc.source import SourceFile
from runtime import ArtifactError, load_formulas
from tests.examples import ROOT

SCHEMA = json.loads((ROOT / "artifact" / "schema" / "artifact.schema.json").read_text())

VIDEO = """\
pipeline video {
    param frames: int = 81 in [1, 1021] where frames % 4 == 1
    param height: int = 720 in [16, 4096] where height % 16 == 0
    param width: int = 1280 in [16, 4096] where width % 16 == 0
    probe frames >= 9  # the VAE's steady regime
    probe height >= 64, width
    stage DecodingStage { memory ~ frames * height * width }
}

pipeline video_child extends video {
    param frames = 41
}

pipeline video_free extends video {
    probe frames  # a child's probe lines replace the parent's, minimums included
    probe height, width
}
"""


def document(text: str = VIDEO) -> dict[str, Any]:
    result = compile_text(text, "video.wf")
    assert result.program is not None, [d.message for d in result.diagnostics]
    assert not result.diagnostics
    doc = artifact(result.program)
    jsonschema.validate(doc, SCHEMA)
    return doc


def test_the_artifact_and_the_loader_carry_the_minimums() -> None:
    doc = document()
    video, child, free = doc["pipelines"]
    assert video["probe_minimums"] == {"frames": 9, "height": 64}
    assert child["probe_minimums"] == {"frames": 9, "height": 64}  # inherited
    assert "probe_minimums" not in free  # none declared: the key is left out
    book = load_formulas(dumps(doc))
    assert dict(book["video"].probe_minimums) == {"frames": 9, "height": 64}
    assert dict(book["video_free"].probe_minimums) == {}
    assert book["video"].probe_axes == (("frames",), ("height", "width"))


def test_fmt_writes_the_minimum_canonically_and_idempotently() -> None:
    messy = VIDEO.replace("probe frames >= 9", "probe frames>=9").replace(">= 64,", ">=64 ,")
    once = format_source(SourceFile("video.wf", messy))
    assert "    probe frames >= 9  # the VAE's steady regime\n" in once
    assert "    probe height >= 64, width\n" in once
    assert format_source(SourceFile("video.wf", once)) == once


def test_probe_stays_a_contextual_keyword() -> None:
    text = "pipeline p {\n    param probe: int = 9 in [1, 99]\n    probe probe >= 3\n}\n"
    doc = document(text)
    assert doc["pipelines"][0]["probe_minimums"] == {"probe": 3}


def test_a_minimum_other_than_ge_or_above_the_range_is_a_diagnostic() -> None:
    (d,) = compile_text(VIDEO.replace("frames >= 9", "frames <= 9"), "v.wf").diagnostics
    assert (d.code, d.message) == (
        "syntax",
        "a probe axis takes a minimum as 'frames >= 9', not '<='",
    )
    (d,) = compile_text(VIDEO.replace("frames >= 9", "frames >= 1025"), "v.wf").diagnostics
    assert d.code == "domain" and "lies above the range [1, 1021]" in d.message


def _edited(edit: Any) -> dict[str, Any]:
    doc = copy.deepcopy(document())
    edit(doc["pipelines"][0])
    return doc


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p["probe_minimums"].update(steps=2), "unexpected key 'steps'"),
        (lambda p: p["probe_minimums"].update(frames=9.0), "expected an integer"),
        (lambda p: p["probe_minimums"].update(frames=True), "expected an integer"),
        (lambda p: p["probe_minimums"].update(frames=1022), "lies above its range's 1021"),
        (lambda p: p.update(probe_minimums=[9]), "expected an object"),
        (lambda p: p.pop("probe_axes"), "unexpected key 'frames'"),
    ],
)
def test_the_loader_refuses_malformed_minimums(edit: Any, message: str) -> None:
    with pytest.raises(ArtifactError, match=message):
        load_formulas(dumps(_edited(edit)))
