"""The artifact: schema-valid, versioned, sources hashed, written atomically."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
import pytest

from dslc.compiler import compile_paths, compile_text
from dslc.emit import FORMAT_VERSION, dumps, write_atomically
from tests.dslc.documents import artifact
from tests.examples import LANGUAGE_EXAMPLE, ROOT, program_of

SCHEMA = json.loads((ROOT / "artifact" / "schema" / "artifact.schema.json").read_text())


def test_language_example_artifact_matches_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "wan.wf"
    path.write_text(LANGUAGE_EXAMPLE)
    result = compile_paths([path])
    assert result.program is not None
    doc = artifact(result.program)
    jsonschema.validate(doc, SCHEMA)
    assert doc["format_version"] == FORMAT_VERSION
    assert doc["sources"][0]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    wan = doc["pipelines"][0]
    assert [p["name"] for p in wan["params"]] == ["steps", "frames", "height", "width", "cfg"]
    assert wan["params"][0] == {
        "name": "steps",
        "type": "int",
        "default": 40,
        "min": 1,
        "max": 1000,
        "span": {"source": 0, "line": 3, "column": 5, "end_line": 3, "end_column": 43},
    }
    assert [c["text"] for c in wan["contracts"]] == [
        "frames % 4 == 1",
        "height % 16 == 0",
        "width % 16 == 0",
    ]
    text_encoding = wan["stages"][0]
    assert text_encoding["memory"] == {"expr": {"k": "int", "v": 1}, "span": None}


def test_formulas_folder_compiles_clean_to_a_valid_artifact() -> None:
    result = compile_paths([ROOT / "formulas"], strict=True)
    doc = artifact(program_of(result))
    jsonschema.validate(doc, SCHEMA)
    assert len(doc["pipelines"]) >= 15


def test_decimals_stay_exact() -> None:
    doc = artifact(program_of(compile_text("pipeline p { stage S { memory ~ 0.725 } }")))
    assert doc["pipelines"][0]["stages"][0]["memory"]["expr"] == {"k": "frac", "n": 29, "d": 40}


def test_write_atomically_leaves_no_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "formulas.json"
    write_atomically(target, dumps({"a": 1}))
    assert json.loads(target.read_text()) == {"a": 1}

    class Boom(Exception):
        pass

    class Exploding(str):
        def __str__(self) -> str:
            raise Boom

    with pytest.raises(TypeError):
        write_atomically(target, 42)  # type: ignore[arg-type]
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["formulas.json"]


def test_schema_rejects_unknown_kinds_and_wrong_arity() -> None:
    result = compile_text("pipeline p { param s: int = 4\n stage S { iterations = s + 1 } }")
    doc = artifact(program_of(result))
    expr = doc["pipelines"][0]["stages"][0]["iterations"]["expr"]
    for bad in ({**expr, "k": "exec"}, {**expr, "args": expr["args"][:1]}, {**expr, "code": "1"}):
        doc["pipelines"][0]["stages"][0]["iterations"]["expr"] = bad
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, SCHEMA)


def test_the_wan_formulas_declare_the_memory_terms_the_estimators_fit() -> None:
    from dslc.build import load_sources

    book = load_sources([ROOT / "formulas"], strict=True)
    wan = book["wan2_1_t2v_1_3b"]  # 81 frames at 480x832: 21 latent frames, 21 x 30 x 52 tokens
    assert wan.memory_terms("DecodingStage") == (480 * 832, 21 * 480 * 832)
    # one pass, and under CFG the latent-sized predictions held across passes
    assert wan.memory_terms("DenoisingStage") == (21 * 30 * 52, 21 * 30 * 52)
    assert wan.memory_terms("DenoisingStage", cfg=False) == (21 * 30 * 52, 0)
    math = book["wan2_1_t2v_1_3b_math_attention"]
    tokens = 21 * 30 * 52
    assert math.memory_terms("DenoisingStage") == (tokens, tokens**2, tokens)
    assert (
        math.iterations("DenoisingStage") == 50 and math.time("DenoisingStage") == 2 * 21 * 30 * 52
    )


def test_attention_heavy_denoisers_declare_a_quadratic_time_term() -> None:
    """HunyuanVideo, Qwen-Image and LTX-2: linear work + self-attention over token pairs."""
    from dslc.build import load_sources

    book = load_sources([ROOT / "formulas"], strict=True)
    hunyuan = book["hunyuan_video_t2v"]  # 129 frames at 720x1280: 33 x 45 x 80 tokens, no CFG
    tokens = 33 * 45 * 80
    assert hunyuan.time_terms("DenoisingStage") == (tokens, tokens * tokens)
    assert hunyuan.time_terms("DenoisingStage", cfg=True) == (2 * tokens, 2 * tokens * tokens)
    assert hunyuan.time_terms("DecodingStage") == (hunyuan.time("DecodingStage"),)
    for name in ("qwen_image", "ltx2"):
        assert len(book[name].time_terms("DenoisingStage")) == 2, name
    assert len(book["ltx2"].time_terms("RefinerStage")) == 2


def test_video_formulas_follow_the_vae_tiles_and_the_scheduler_regimes() -> None:
    """HunyuanVideo's decode: one 17-frame tile at most in flight plus the whole tiles held before
    the last one; Helios: the scheduler's state from the second and third step, the history term."""
    from dslc.build import load_sources

    book = load_sources([ROOT / "formulas"], strict=True)
    hunyuan = book["hunyuan_video_t2v"]
    pixels = 32 * 32
    held = {
        frames: hunyuan.memory_terms("DecodingStage", frames=frames, height=32, width=32)[3]
        for frames in (1, 13, 17, 25, 29, 37, 41, 129)
    }
    assert held == {
        1: 0,
        13: 0,
        17: 0,
        25: 0,
        29: 17 * pixels,
        37: 17 * pixels,
        41: 2 * 17 * pixels,
        129: 9 * 17 * pixels,
    }
    tile = hunyuan.memory_terms("DecodingStage", frames=41, height=32, width=32)
    assert tile[:3] == (pixels, 17 * pixels, 41 * pixels)
    helios = book["helios"]
    tokens = 9 * 2 * 2
    steps = {
        n: helios.memory_terms("DenoisingStage", steps=n, height=32, width=32, cfg=False)
        for n in (1, 2, 3, 50)
    }
    assert steps == {
        1: (tokens, 0, 0, 0, 0),
        2: (tokens, tokens, tokens, 0, 0),
        3: (tokens, tokens, 2 * tokens, 0, 0),
        50: (tokens, tokens, 2 * tokens, 0, 0),
    }
    cfg = [helios.memory_terms("DenoisingStage", steps=n, height=32, width=32)[3:] for n in (1, 2)]
    assert cfg == [(tokens, 0), (tokens, tokens)]  # CFG: one more latent from the second step
    assert helios.memory_terms("DecodingStage", steps=1, height=32, width=32, cfg=False)[1] == 0
    assert (
        helios.memory_terms("DecodingStage", steps=9, height=32, width=32, cfg=False)[1] == tokens
    )
    assert helios.memory_terms("TextEncodingStage", height=32, width=64) == (4 * 8, 1)
