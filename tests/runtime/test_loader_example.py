"""Every line of the docs/language.md loader example, against the hand-written Wan artifact."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from runtime import FormulaBook, Pipeline, StageValues, load_formulas

from .conftest import WAN_PATH

WAN_STAGES = ("TextEncodingStage", "DenoisingStage", "DecodingStage")
DEFAULTS = {"steps": 40, "frames": 81, "height": 720, "width": 1280, "cfg": True}


@pytest.mark.parametrize(
    "source",
    [
        str(WAN_PATH),
        WAN_PATH,
        WAN_PATH.read_text(),
        WAN_PATH.read_bytes(),
        "  \n" + WAN_PATH.read_text(),
    ],
    ids=["str-path", "pathlib", "text", "bytes", "text-with-leading-space"],
)
def test_load_formulas_accepts_path_or_json(source: object) -> None:
    book = load_formulas(source)  # type: ignore[arg-type]
    assert isinstance(book, FormulaBook)
    assert list(book) == ["wan2_2_t2v_a14b", "wan2_2_i2v_a14b", "wan2_1_t2v_dmd", "minimax_h3"]
    assert book.format_version == 1
    assert book.compiler == ("dslc", "0.1.0")
    assert book.sources[0].path == "formulas/wan2_2.wf"


def test_stages(wan: Pipeline) -> None:
    assert wan.stages == WAN_STAGES


def test_default_workload(wan: Pipeline) -> None:
    assert wan.default_workload == DEFAULTS
    wan.default_workload["steps"] = 1  # a fresh dict each time: mutating it changes nothing
    assert wan.default_workload == DEFAULTS


def test_iterations_with_defaults_for_other_params(wan: Pipeline) -> None:
    assert wan.iterations("DenoisingStage", steps=4) == 4
    assert wan.iterations("DenoisingStage") == 40
    assert type(wan.iterations("DenoisingStage", steps=4)) is int


def test_evaluate(wan: Pipeline) -> None:
    latent_frames = (81 - 1) // 4 + 1
    tokens = latent_frames * (720 // 16) * (1280 // 16)
    assert wan.evaluate(steps=4) == {
        "TextEncodingStage": StageValues(1, 1, 1),
        "DenoisingStage": StageValues(4, tokens, tokens * 2),
        "DecodingStage": StageValues(1, latent_frames * 720 * 1280, latent_frames * 720 * 1280),
    }
    assert wan.evaluate(cfg=False)["DenoisingStage"] == StageValues(40, tokens, tokens)


def test_stage_iterations(wan: Pipeline) -> None:
    assert wan.stage_iterations(probe={"steps": 4}) == {
        "TextEncodingStage": (1, 1),
        "DenoisingStage": (4, 40),
        "DecodingStage": (1, 1),
    }
    assert wan.stage_iterations(probe={"steps": 4})["DenoisingStage"] == (4, 40)
    assert wan.stage_iterations({"steps": 4}, target={"steps": 20})["DenoisingStage"] == (4, 20)


def test_is_admissible(wan: Pipeline) -> None:
    assert wan.is_admissible(frames=80) is False
    assert wan.is_admissible(frames=81) is True
    assert wan.is_admissible() is True


@pytest.mark.parametrize(
    ("at_most", "expected"), [(61, 61), (60, 57), (30, 29), (1, 1), (0, None), (5000, 1021)]
)
def test_largest_admissible(wan: Pipeline, at_most: int, expected: int | None) -> None:
    assert wan.largest_admissible("frames", at_most=at_most) == expected


def test_i2v_is_flattened_with_image_encoding_appended(book: FormulaBook) -> None:
    i2v = book["wan2_2_i2v_a14b"]
    assert i2v.stages == WAN_STAGES + ("ImageEncodingStage",)
    assert i2v.extends == "wan2_2_t2v_a14b"
    assert i2v.default_workload == DEFAULTS
    assert i2v.evaluate(steps=4)["ImageEncodingStage"] == StageValues(1, 1, 1)


def test_dmd_runs_a_fixed_schedule(book: FormulaBook) -> None:
    dmd = book["wan2_1_t2v_dmd"]
    assert dmd.default_workload["steps"] == 4
    assert dmd.iterations("DenoisingStage") == 4
    assert dmd.iterations("DenoisingStage", steps=40) == 4
    assert dmd.stage_iterations({"steps": 2})["DenoisingStage"] == (4, 4)


def test_minimax_runs_one_call_fewer(book: FormulaBook) -> None:
    minimax = book["minimax_h3"]
    assert minimax.stages == ("DenoisingStage",)
    assert minimax.default_workload == {"steps": 50}
    assert minimax.iterations("DenoisingStage", steps=4) == 3
    assert minimax.stage_iterations({"steps": 4}) == {"DenoisingStage": (3, 49)}


def test_memory_and_time_are_exact(wan: Pipeline) -> None:
    assert wan.memory("DenoisingStage", frames=17, height=480, width=832) == 5 * 30 * 52
    assert wan.time("DenoisingStage", frames=17, height=480, width=832, cfg=False) == 5 * 30 * 52
    assert wan.time("TextEncodingStage") == 1


def test_params_metadata(wan: Pipeline) -> None:
    frames = wan.params["frames"]
    assert (frames.name, frames.type, frames.default, frames.min, frames.max) == (
        "frames",
        "int",
        81,
        1,
        1021,
    )
    assert frames.contracts == ("frames % 4 == 1",)
    assert frames.range_text == "[1, 1021]"
    cfg = wan.params["cfg"]
    assert (cfg.type, cfg.default, cfg.min, cfg.max, cfg.contracts, cfg.range_text) == (
        "bool",
        True,
        None,
        None,
        (),
        "",
    )
    assert wan.param_names == ("steps", "frames", "height", "width", "cfg")
    assert wan.contracts == ("frames % 4 == 1", "height % 16 == 0", "width % 16 == 0")
    with pytest.raises(TypeError):
        wan.params["steps"] = None  # type: ignore[index]


def test_violations(wan: Pipeline) -> None:
    assert wan.violations() == ()
    assert wan.violations(frames=80) == ("frames = 80 violates `frames % 4 == 1`",)
    assert wan.violations(steps=0) == ("steps = 0 is outside [1, 1000]",)
    assert wan.violations(steps=0, frames=80, width=1000) == (
        "steps = 0 is outside [1, 1000]",
        "frames = 80 violates `frames % 4 == 1`",
        "width = 1000 violates `width % 16 == 0`",
    )


def test_compiled_paths_are_raw_closures(wan: Pipeline) -> None:
    raw = wan.compiled_iterations("DenoisingStage")
    assert raw(4, 81, 720, 1280, True) == 4
    with pytest.raises(TypeError):
        raw(4)  # every param, positionally: the raw closure has no defaults
    assert raw(80, 80, 1, 1, False) == 80  # unchecked: no range or contract test
    assert wan.compiled_memory("DecodingStage")(40, 81, 720, 1280, True) == 21 * 720 * 1280
    assert wan.compiled_time("DenoisingStage")(40, 81, 720, 1280, False) == 21 * 45 * 80


def test_fraction_results_stay_exact() -> None:
    from .builders import F, I, P, one_stage, op

    book = load_formulas(
        one_stage(memory=op("mul", P("steps"), F(29, 40)), time=op("div", P("steps"), I(8)))
    )
    p = book["p"]
    assert p.memory("S") == 29
    assert type(p.memory("S")) is int  # integral Fraction normalised to int
    assert p.memory("S", steps=3) == Fraction(87, 40)
    assert p.time("S", steps=3) == Fraction(3, 8)
    assert p.evaluate(steps=12)["S"] == StageValues(1, Fraction(87, 10), Fraction(3, 2))


def test_load_accepts_a_parsed_mapping(wan_doc: dict[str, object]) -> None:
    assert load_formulas(wan_doc)["minimax_h3"].iterations("DenoisingStage") == 49


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_formulas(tmp_path / "nope.json")


def test_edge_shapes_no_params_no_stages_no_pipelines() -> None:
    from .builders import I, document, pipeline, stage

    bare = load_formulas(
        document(pipeline("bare", [], [stage("S", iterations=I(3))]), pipeline("empty", [], []))
    )
    p = bare["bare"]
    assert p.param_names == () and p.default_workload == {}
    assert p.iterations("S") == 3 and p.evaluate() == {"S": StageValues(3, 1, 1)}
    assert p.stage_iterations({}) == {"S": (3, 3)}
    assert p.is_admissible() and p.violations() == ()
    assert bare["empty"].stages == () and bare["empty"].evaluate() == {}
    assert bare["empty"].stage_iterations({}) == {}
    assert len(load_formulas(document())) == 0
