"""A memory of several terms on the command line: `eval`, `explain` and `build` show each term."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dslc import __version__
from dslc.cli import cli

VAE = """\
pipeline vae {
    param frames: int = 81 in [1, 1021] where frames % 4 == 1
    param height: int = 720 in [16, 4096] where height % 16 == 0
    param width: int = 1280 in [16, 4096] where width % 16 == 0
    let latent_frames = (frames - 1) // 4 + 1
    stage TextEncodingStage { iterations = 1 }
    stage DecodingStage {
        memory ~ [height * width, latent_frames * height * width]  # working set + output
        time ~ latent_frames * height * width
    }
}
"""
PIXELS = 720 * 1280


@pytest.fixture
def vae(tmp_path: Path) -> Path:
    path = tmp_path / "vae.wf"
    path.write_text(VAE)
    return path


def run(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_eval_json_has_memory_terms_only_where_there_are_several(vae: Path) -> None:
    doc = json.loads(run("eval", str(vae), "vae", "--set", "frames=5", "--json").stdout)
    assert doc["stages"]["DecodingStage"] == {
        "iterations": 1,
        "memory": 3 * PIXELS,
        "time": 2 * PIXELS,
        "memory_terms": [PIXELS, 2 * PIXELS],
    }
    assert doc["stages"]["TextEncodingStage"] == {"iterations": 1, "memory": 1, "time": 1}


def test_eval_json_from_a_built_artifact_agrees(vae: Path, tmp_path: Path) -> None:
    out = tmp_path / "formulas.json"
    run("build", str(vae), "-o", str(out))
    memory = json.loads(out.read_text())["pipelines"][0]["stages"][1]["memory"]
    assert len(memory["terms"]) == 2
    assert json.loads(out.read_text())["compiler"] == {"name": "dslc", "version": __version__}
    assert (
        run("eval", str(out), "vae", "--json").stdout
        == run("eval", str(vae), "vae", "--json").stdout
    )


def test_eval_table_shows_each_term_under_its_stage(vae: Path) -> None:
    lines = run("eval", str(vae), "vae", "--set", "frames=5").stdout.splitlines()
    assert [line.split() for line in lines[2:]] == [
        ["stage", "iterations", "memory", "time"],
        ["TextEncodingStage", "1", "1", "1"],
        ["DecodingStage", "1", str(3 * PIXELS), str(2 * PIXELS)],
        ["memory[0]", str(PIXELS)],
        ["memory[1]", str(2 * PIXELS)],
    ]
    assert lines[5].startswith(
        "  memory[0]"
    )  # indexed as runtime.Pipeline.memory_terms() names them


def test_explain_shows_the_total_then_each_term(vae: Path) -> None:
    lines = run("explain", str(vae), "vae", "--probe", "frames=5").stdout.splitlines()
    rows = [line.split(None, 5) for line in lines[3:] if line.startswith("DecodingStage")]
    assert [row[1:5] for row in rows] == [
        ["iterations", "1", "1", "1"],
        ["memory", str(3 * PIXELS), str(22 * PIXELS), "7.33333"],
        ["memory[0]", str(PIXELS), str(PIXELS), "1"],
        ["memory[1]", str(2 * PIXELS), str(21 * PIXELS), "10.5"],
        ["time", str(2 * PIXELS), str(21 * PIXELS), "10.5"],
    ]
    assert rows[2][5] == "~ height * width"
    assert rows[3][5] == rows[4][5] == "~ height * width * ((frames - 1) // 4 + 1)"
    assert rows[1][5] == "~ height * width * ((frames - 1) // 4 + 1) + height * width"


def test_explain_json_nests_the_terms_under_the_memory(vae: Path) -> None:
    doc = json.loads(run("explain", str(vae), "vae", "--probe", "frames=5", "--json").stdout)
    memory = doc["stages"]["DecodingStage"]["memory"]
    assert (memory["probe"], memory["target"], memory["declared"]) == (
        3 * PIXELS,
        22 * PIXELS,
        True,
    )
    assert memory["terms"] == [
        {"formula": "height * width", "probe": PIXELS, "target": PIXELS, "ratio": 1},
        {
            "formula": "height * width * ((frames - 1) // 4 + 1)",
            "probe": 2 * PIXELS,
            "target": 21 * PIXELS,
            "ratio": 10.5,
        },
    ]
    assert "terms" not in doc["stages"]["DecodingStage"]["time"]
    assert "terms" not in doc["stages"]["TextEncodingStage"]["memory"]
