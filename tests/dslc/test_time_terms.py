"""A time measure of several terms (`time ~ [a, b]`): compiled, emitted, loaded, explained,
formatted and inherited like a memory of several terms."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from click.testing import CliRunner

from dslc.cli import cli
from dslc.compiler import compile_text
from dslc.emit import dumps
from dslc.explain import explain
from dslc.fmt import format_source
from dslc.source import SourceFile
from runtime import Pipeline, load_formulas
from tests.dslc.documents import artifact
from tests.examples import ROOT

SCHEMA = json.loads((ROOT / "artifact" / "schema" / "artifact.schema.json").read_text())

DIT = """\
pipeline dit {
    param height: int = 1024 in [64, 4096] where height % 16 == 0
    param width: int = 1024 in [64, 4096] where width % 16 == 0
    param cfg: bool = true
    let tokens = (height // 16) * (width // 16)
    let passes = if cfg then 2 else 1
    let parts = [tokens, tokens * tokens]
    stage DenoisingStage {
        memory ~ tokens
        time ~ [tokens * passes, tokens * tokens * passes]  # linear work + attention
    }
    stage LetStage { time ~ parts }
    stage OneStage { time ~ [tokens] }
}

pipeline dit_linear extends dit {
    stage DenoisingStage { time ~ tokens * passes }  # replaces both terms
}
"""


def compiled(text: str = DIT) -> dict[str, Pipeline]:
    result = compile_text(text, "dit.wf")
    assert result.program is not None, [d.message for d in result.diagnostics]
    doc = artifact(result.program)
    jsonschema.validate(doc, SCHEMA)
    return dict(load_formulas(dumps(doc)).items())


def test_the_artifact_carries_the_time_terms_and_their_sum() -> None:
    result = compile_text(DIT, "dit.wf")
    assert result.program is not None and not result.diagnostics
    stage = artifact(result.program)["pipelines"][0]["stages"][0]
    time = stage["time"]
    assert len(time["terms"]) == 2
    assert time["expr"] == {"k": "add", "args": [t["expr"] for t in time["terms"]]}
    assert "terms" not in stage["memory"]


def test_the_runtime_evaluates_each_term() -> None:
    dit = compiled()["dit"]
    tokens = 64 * 64
    assert dit.time_terms("DenoisingStage") == (2 * tokens, 2 * tokens * tokens)
    assert dit.time_terms("DenoisingStage", cfg=False, height=512) == (2048, 2048 * 2048)
    assert dit.time("DenoisingStage") == sum(dit.time_terms("DenoisingStage"))
    assert dit.time_terms("LetStage") == (tokens, tokens * tokens)
    assert dit.time_terms("OneStage") == (tokens,)  # a one-item list is the plain measure
    assert dit.memory_terms("DenoisingStage") == (tokens,)


def test_a_childs_override_replaces_every_term() -> None:
    child = compiled()["dit_linear"]
    assert child.time_terms("DenoisingStage") == (2 * 64 * 64,)
    assert child.time_terms("LetStage") == (64 * 64, 64**4)  # inherited untouched


def test_each_term_is_proved_nonnegative_on_its_own() -> None:
    text = DIT.replace("tokens * tokens * passes]", "tokens - 5000]")
    (d,) = compile_text(text, "dit.wf").diagnostics
    assert (d.code, d.severity) == ("negative", "error")
    assert d.message.startswith("term 2 of 'time' of stage 'DenoisingStage' is ")


def test_explain_shows_each_term_under_the_total() -> None:
    result = compile_text(DIT, "dit.wf")
    assert result.program is not None
    resolved = result.program.pipeline("dit")
    assert resolved is not None
    explained = explain(resolved, compiled()["dit"], {"height": 512})
    rows = {f.label: f for f in explained.fields if f.stage == "DenoisingStage"}
    assert rows["time[0]"].probe == 2 * 32 * 64 and rows["time[0]"].target == 2 * 64 * 64
    assert rows["time[1]"].ratio == 4  # attention grows with the square of the tokens
    assert rows["time"].target == rows["time[0]"].target + rows["time[1]"].target


def test_eval_prints_and_reports_the_terms(tmp_path: Path) -> None:
    source = tmp_path / "dit.wf"
    source.write_text(DIT)
    out = CliRunner().invoke(cli, ["eval", str(source), "dit", "--json"])
    assert out.exit_code == 0, out.output
    stage = json.loads(out.output)["stages"]["DenoisingStage"]
    assert stage["time_terms"] == [2 * 64 * 64, 2 * 64**4]
    assert "time_terms" not in json.loads(out.output)["stages"]["OneStage"]
    text = CliRunner().invoke(cli, ["eval", str(source), "dit"])
    assert "time[1]" in text.output


def test_fmt_keeps_the_list_and_is_idempotent() -> None:
    messy = DIT.replace("time ~ [tokens * passes, ", "time ~ [ tokens*passes ,")
    once = format_source(SourceFile("dit.wf", messy))
    assert "time ~ [tokens * passes, tokens * tokens * passes]" in once
    assert format_source(SourceFile("dit.wf", once)) == once
