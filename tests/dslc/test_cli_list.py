"""`dslc list`, unknown pipeline names that point at it, and `dslc fmt --diff`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dslc.cli import cli

SOURCE = """\
pipeline video_model {
    param steps: int = 40 in [1, 1000]
    param frames: int = 81 in [1, 1000] where frames % 4 == 1
    param cfg: bool = true
    stage TextEncodingStage { iterations = 1 }
    stage DenoisingStage { iterations = steps }
}

pipeline video_model_fast extends video_model {
    param steps = 4
}

pipeline image_model {
    stage DecodingStage { iterations = 1 }
}
"""

UNCANONICAL = "pipeline   q{param steps:int=4 in [1,10]\nstage S{iterations=steps}}\n"


def run(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code != 3, result.output
    return result


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "models.wf"
    path.write_text(SOURCE)
    return path


@pytest.fixture
def artifact(source: Path, tmp_path: Path) -> Path:
    out = tmp_path / "models.json"
    assert run("build", str(source), "-o", str(out)).exit_code == 0
    return out


def test_list_shows_each_pipeline_with_params_and_stages(source: Path) -> None:
    result = run("list", str(source))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:6] == [
        "video_model",
        "stages: TextEncodingStage, DenoisingStage",
        "param   type  default  range      contract",
        "steps   int        40  [1, 1000]  -",
        "frames  int        81  [1, 1000]  frames % 4 == 1",
        "cfg     bool     true  -          -",
    ]
    assert "video_model_fast (extends video_model)" in result.stdout
    assert "steps   int         4  [1, 1000]" in result.stdout  # the overridden default
    assert "image_model\nstages: DecodingStage\nno params\n" in result.stdout


def test_list_json_is_the_same_from_sources_and_artifact(source: Path, artifact: Path) -> None:
    from_sources = json.loads(run("list", str(source), "--json").stdout)
    assert from_sources == json.loads(run("list", str(artifact), "--json").stdout)
    first = from_sources["pipelines"][0]
    assert first["name"] == "video_model" and first["extends"] is None
    assert first["stages"] == ["TextEncodingStage", "DenoisingStage"]
    assert first["params"][1] == {
        "name": "frames",
        "type": "int",
        "default": 81,
        "min": 1,
        "max": 1000,
        "contracts": ["frames % 4 == 1"],
    }
    assert [p["name"] for p in from_sources["pipelines"]] == [
        "video_model",
        "video_model_fast",
        "image_model",
    ]


@pytest.mark.parametrize("command", ["eval", "explain"])
def test_unknown_pipeline_in_sources_lists_the_closest_and_how_to_list_all(
    source: Path, command: str
) -> None:
    result = run(command, str(source), "video")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: no pipeline 'video' in the sources {source}; did you mean 'video_model' or "
        f"'video_model_fast'? (list all 3 with: dslc list {source})\n"
    )


def test_unknown_pipeline_in_an_artifact_says_artifact(artifact: Path) -> None:
    result = run("eval", str(artifact), "imag_model")
    assert result.exit_code == 1
    assert (
        f"no pipeline 'imag_model' in the artifact {artifact}; did you mean 'image_model' or"
        in (result.stderr)
    )
    nothing_close = run("eval", str(artifact), "zzz")
    assert "did you mean" not in nothing_close.stderr
    assert f"(list all 3 with: dslc list {artifact})" in nothing_close.stderr


def test_fmt_check_diff_prints_a_unified_diff_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "u.wf"
    path.write_text(UNCANONICAL)
    result = run("fmt", "--check", "--diff", str(path))
    assert result.exit_code == 1
    assert result.stdout == (
        f"--- {path}\n"
        f"+++ {path} (formatted)\n"
        "@@ -1,2 +1,4 @@\n"
        "-pipeline   q{param steps:int=4 in [1,10]\n"
        "-stage S{iterations=steps}}\n"
        "+pipeline q {\n"
        "+    param steps: int = 4 in [1, 10]\n"
        "+    stage S { iterations = steps }\n"
        "+}\n"
    )
    assert path.read_text() == UNCANONICAL
    assert "1 file would be reformatted" in result.stderr


def test_fmt_diff_alone_exits_0_and_canonical_files_print_nothing(tmp_path: Path) -> None:
    path = tmp_path / "u.wf"
    path.write_text(UNCANONICAL)
    assert run("fmt", "--diff", str(path)).exit_code == 0
    assert path.read_text() == UNCANONICAL
    assert run("fmt", str(path)).exit_code == 0
    again = run("fmt", "--check", "--diff", str(path))
    assert again.exit_code == 0 and again.stdout == ""
