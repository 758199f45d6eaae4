"""Pipeline facts (`uses`, `per step`, `call`, `probe`): parsed, checked, inherited, formatted,
emitted and loaded back by the runtime."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dslc import ast
from dslc.build import load_program, load_text
from dslc.cli import cli
from dslc.compiler import compile_paths, compile_text
from dslc.emit import dumps
from dslc.fmt import format_source
from dslc.parse import parse_text
from dslc.source import SourceFile
from runtime import ComponentUse, InadmissibleError, UnknownParamError, load_formulas
from tests.dslc.documents import artifact
from tests.examples import ROOT, program_of

SCHEMA = json.loads((ROOT / "artifact" / "schema" / "artifact.schema.json").read_text())

WAN = """\
pipeline wan {
    param steps: int = 50 in [1, 1000]
    param frames: int = 81 in [1, 1021] where frames % 4 == 1
    param height: int = 480 in [16, 4096] where height % 16 == 0
    param width: int = 832 in [16, 4096] where width % 16 == 0
    param cfg: bool = true

    call num_inference_steps = steps  # pipe(...) keyword = expression
    call num_frames = frames
    call height = height
    call width = width
    call guidance_scale = if cfg then 5 else 1

    probe frames  # lightened first
    probe height, width

    stage TextEncodingStage uses text_encoder { iterations = 1 }
    stage DenoisingStage uses transformer, transformer_2 per step { iterations = steps }
    stage DecodingStage uses vae.decode { iterations = 1 }
}
"""


def compiled(text: str):
    result = compile_text(text, "t.wf")
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.program is not None
    return result.program


def errors(text: str) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in compile_text(text, "t.wf").errors]


def loaded(text: str, name: str):  # type: ignore[no-untyped-def]
    return load_program(compiled(text))[name]


# --- syntax ----------------------------------------------------------------------------------


def test_parse_builds_fact_nodes() -> None:
    (pipeline,) = parse_text(WAN).pipelines
    members = pipeline.members
    calls = [m for m in members if isinstance(m, ast.CallArg)]
    assert [c.arg for c in calls][:2] == ["num_inference_steps", "num_frames"]
    assert calls[4].value == ast.IfElse(ast.Name("cfg"), ast.Num(Fraction(5)), ast.Num(Fraction(1)))
    assert [m.names for m in members if isinstance(m, ast.Probe)] == [
        ("frames",),
        ("height", "width"),
    ]
    stages = [m for m in members if isinstance(m, ast.Stage)]
    assert stages[1].uses == (ast.Use("transformer"), ast.Use("transformer_2"))
    assert stages[1].per_step and not stages[0].per_step
    assert stages[2].uses == (ast.Use("vae", "decode"),)
    assert stages[2].uses[0].entry == "decode" and stages[0].uses[0].entry == "forward"


OLD_NAMES = """\
pipeline old {
    param call: int = 2 in [1, 10]
    param probe: int = 3 in [1, 10]
    param uses: int = 1 in [0, 10]
    param per: int = 4 in [1, 10]
    let step = call * probe + uses
    stage per { iterations = step + per }
    stage call { iterations = call }
    stage uses uses step, per.step per step { iterations = probe }
}
"""


def test_new_keywords_stay_ordinary_names_elsewhere() -> None:
    program = compiled(OLD_NAMES)
    (old,) = program.pipelines
    assert [p.name for p in old.params] == ["call", "probe", "uses", "per"]
    assert [s.name for s in old.stages] == ["per", "call", "uses"]
    assert old.stages[2].uses == (ast.Use("step"), ast.Use("per", "step"))
    pipeline = load_program(program)["old"]
    assert pipeline.iterations("per") == 2 * 3 + 1 + 4
    assert format_source(SourceFile("t.wf", OLD_NAMES)) == OLD_NAMES


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pipeline p { stage S uses { } }", "unexpected '{'; expected a name"),
        ("pipeline p { stage S per { } }", "unexpected '{'; expected 'step'"),
        ("pipeline p { stage S per step uses a { } }", "unexpected 'uses'; expected '{'"),
        ("pipeline p { stage S uses a. { } }", "unexpected '{'; expected a name"),
        ("pipeline p { probe }", "unexpected '}'; expected a name"),
        ("pipeline p { call = 1 }", "unexpected '='; expected a name"),
    ],
)
def test_fact_syntax_errors(text: str, message: str) -> None:
    assert errors(text) == [("syntax", message)]


# --- checks ----------------------------------------------------------------------------------


FACT_ERRORS = [
    (
        "stage A uses vae.decode {}; stage B uses vae.decode {}",
        "duplicate",
        "'vae.decode' opens both",
    ),
    ("stage A uses te, te.forward {}", "duplicate", "'te.forward' is listed twice in stage 'A'"),
    ("stage A per step {}; stage B per step {}", "duplicate", "stages 'A' and 'B' are both"),
    ("call x = 1; call x = 2", "duplicate", "call 'x' is declared twice"),
    ("call x = [1, 2]", "type", "a list may only be a let's value"),
    ("let l = [1, 2]; call x = l", "type", "'l' is a list"),
    ("call x = nope", "undefined-name", "unknown name 'nope'"),
    ("probe step", "undefined-name", "unknown param 'step' in 'probe'"),
    ("probe flag", "type", "probe axis 'flag' is a bool param; a probe axis is an int param"),
    ("probe n; probe m, n", "duplicate", "'n' is a probe axis twice"),
    ("let k = n; probe k", "undefined-name", "unknown param 'k' in 'probe'; it is a let"),
]


@pytest.mark.parametrize(("members", "code", "message"), FACT_ERRORS)
def test_fact_errors(members: str, code: str, message: str) -> None:
    text = (
        "pipeline p {\n    param n: int = 4 in [0, 9]\n    param m: int = 1 in [1, 9]\n"
        f"    param flag: bool = true\n    {members}\n}}\n"
    )
    ((got_code, got_message),) = errors(text)
    assert got_code == code and got_message.startswith(message), got_message


def test_probe_suggests_a_close_int_param() -> None:
    result = compile_text("pipeline p { param frames: int = 1 in [1, 9]; probe frame }", "t.wf")
    (problem,) = result.errors
    assert "frames" in " ".join(problem.hints)


def test_same_component_with_other_methods_in_two_stages_is_fine() -> None:
    program = compiled("pipeline p { stage E uses vae.encode {}; stage D uses vae.decode, vae {} }")
    assert [u.entry for u in program.pipelines[0].stages[1].uses] == ["decode", "forward"]


def test_call_divisions_are_proved() -> None:
    text = "pipeline p { param n: int = 4 in [0, 9]; call x = 12 / n }"
    assert [code for code, _ in errors(text)] == ["division-by-zero"]
    compiled("pipeline p { param n: int = 4 in [0, 9]; call x = if n > 0 then 12 / n else 0 }")


def test_call_values_may_be_negative_rational_or_boolean() -> None:
    pipeline = loaded(
        "pipeline p { param n: int = 4 in [0, 9]; call a = n - 10; call b = n / 8; "
        "call c = n > 2 }",
        "p",
    )
    assert pipeline.call_arguments() == {"a": -6, "b": Fraction(1, 2), "c": True}
    assert pipeline.call_arguments(n=8) == {"a": -2, "b": 1, "c": True}
    assert type(pipeline.call_arguments(n=8)["b"]) is int


# --- inheritance -----------------------------------------------------------------------------

FAMILY = (
    WAN
    + """
pipeline child extends wan {
    call guidance_scale = 3
    call extra = steps // 2
    stage DecodingStage { iterations = 2 }
    stage DenoisingStage uses transformer { iterations = steps + 1 }
}

pipeline grandchild extends child {
    probe height
    stage ImageEncodingStage uses image_encoder, vae.encode {}
}
"""
)


def test_inheritance_of_facts() -> None:
    book = load_program(compiled(FAMILY))
    wan, child, grandchild = book["wan"], book["child"], book["grandchild"]
    assert child.call_names == (*wan.call_names, "extra")
    assert child.call_arguments()["guidance_scale"] == 3
    assert child.call_arguments(steps=7)["extra"] == 3
    assert child.probe_axes == wan.probe_axes == (("frames",), ("height", "width"))
    assert grandchild.probe_axes == (("height",),)
    # an override header with `uses` replaces both facts; one without keeps them
    assert child.uses["DenoisingStage"] == (ComponentUse("transformer", "forward"),)
    assert child.stepped_stages == ()
    assert child.uses["DecodingStage"] == (ComponentUse("vae", "decode"),)
    assert grandchild.uses["ImageEncodingStage"] == (
        ComponentUse("image_encoder", "forward"),
        ComponentUse("vae", "encode"),
    )


def test_a_child_stage_cannot_take_a_use_of_the_parent() -> None:
    text = WAN + "pipeline c extends wan { stage Other uses vae.decode {} }\n"
    assert errors(text) == [
        ("duplicate", "'vae.decode' opens both stage 'DecodingStage' and stage 'Other'")
    ]


# --- fmt ---------------------------------------------------------------------------------------


def test_fmt_is_canonical_and_idempotent_on_facts() -> None:
    messy = (
        "pipeline p {\n  param n: int = 4 in [0, 9]\n  call   x=n*2   # why\n"
        "  probe n\n  stage  S  uses a ,b.c   per   step{iterations=n}\n}\n"
    )
    out = format_source(SourceFile("t.wf", messy))
    assert out == (
        "pipeline p {\n    param n: int = 4 in [0, 9]\n    call x = n * 2  # why\n"
        "    probe n\n    stage S uses a, b.c per step { iterations = n }\n}\n"
    )
    assert parse_text(out) == parse_text(messy)
    assert format_source(SourceFile("t.wf", out)) == out
    assert format_source(SourceFile("t.wf", WAN)) == WAN
    assert format_source(SourceFile("t.wf", FAMILY)) == FAMILY


def test_fmt_block_stage_keeps_its_header_facts() -> None:
    text = (
        "pipeline p {\n    stage S uses transformer per step {\n        iterations = 2\n"
        "        time ~ 3\n    }\n}\n"
    )
    assert format_source(SourceFile("t.wf", text)) == text


# --- emit and load ---------------------------------------------------------------------------


def test_artifact_carries_the_facts_and_matches_the_schema() -> None:
    doc = artifact(compiled(WAN))
    jsonschema.validate(doc, SCHEMA)
    (wan,) = doc["pipelines"]
    assert [c["arg"] for c in wan["calls"]] == [
        "num_inference_steps",
        "num_frames",
        "height",
        "width",
        "guidance_scale",
    ]
    assert wan["calls"][0]["expr"] == {"k": "param", "name": "steps"}
    assert wan["calls"][0]["span"]["line"] == 8
    assert wan["probe_axes"] == [["frames"], ["height", "width"]]
    text, denoise, decode = wan["stages"]
    assert text["uses"] == [{"component": "text_encoder", "method": "forward"}]
    assert denoise["per_step"] is True and "per_step" not in text
    assert decode["uses"] == [{"component": "vae", "method": "decode"}]


def test_no_facts_no_keys() -> None:
    (pipeline,) = artifact(compiled("pipeline p { stage S { iterations = 1 } }"))["pipelines"]
    assert "calls" not in pipeline and "probe_axes" not in pipeline
    assert set(pipeline["stages"][0]) == {"name", "span", "iterations", "memory", "time"}
    book = load_text("pipeline p { stage S {} }", "t.wf")
    assert book["p"].uses == {"S": ()}
    assert book["p"].call_names == () and book["p"].call_arguments() == {}
    assert book["p"].probe_axes == () and book["p"].stepped_stages == ()


def test_runtime_api_after_dslc_build(tmp_path: Path) -> None:
    source = tmp_path / "wan.wf"
    source.write_text(WAN)
    out = tmp_path / "wan.json"
    out.write_text(dumps(artifact(program_of(compile_paths([source])))))
    wan = load_formulas(out)["wan"]
    assert wan.uses == {
        "TextEncodingStage": (ComponentUse("text_encoder", "forward"),),
        "DenoisingStage": (
            ComponentUse("transformer", "forward"),
            ComponentUse("transformer_2", "forward"),
        ),
        "DecodingStage": (ComponentUse("vae", "decode"),),
    }
    assert wan.stepped_stages == ("DenoisingStage",)
    assert wan.call_arguments() == {
        "num_inference_steps": 50,
        "num_frames": 81,
        "height": 480,
        "width": 832,
        "guidance_scale": 5,
    }
    assert wan.call_arguments(steps=4, frames=17, cfg=False) == {
        "num_inference_steps": 4,
        "num_frames": 17,
        "height": 480,
        "width": 832,
        "guidance_scale": 1,
    }
    with pytest.raises(UnknownParamError):
        wan.call_arguments(step=4)
    with pytest.raises(InadmissibleError):
        wan.call_arguments(frames=16)
    with pytest.raises(TypeError):
        wan.call_arguments(cfg=1)


# --- fmt property ------------------------------------------------------------------------------

_NAMES = st.sampled_from(["call", "probe", "uses", "per", "step", "vae", "decode", "x", "steps"])


@st.composite
def _fact_members(draw: st.DrawFn) -> str:
    """A pipeline of random fact members, keywords used as names wherever a name may stand."""
    lines = []
    for index in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["call", "probe", "stage"]))
        if kind == "call":
            value = draw(st.sampled_from(["1", "2 / 3", "true", "if true then 1 else 2"]))
            lines.append(f"call {draw(_NAMES)} = {value}")
        elif kind == "probe":
            names = draw(st.lists(_NAMES, min_size=1, max_size=3))
            lines.append("probe " + " ,".join(names))
        else:
            uses = draw(st.lists(st.tuples(_NAMES, st.none() | _NAMES), max_size=3))
            header = f"stage S{index}"
            if uses:
                header += " uses " + ", ".join(c + (f" . {m}" if m else "") for c, m in uses)
            header += " per  step" if draw(st.booleans()) else ""
            lines.append(header + draw(st.sampled_from([" {}", " {iterations=1}", "{ }"])))
    separator = draw(st.sampled_from(["\n", "\n\n  ", " ; "]))
    return "pipeline p {\n" + separator.join(lines) + "\n}\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fact_members())
def test_fmt_round_trips_random_facts(text: str) -> None:
    out = format_source(SourceFile("t.wf", text))
    assert parse_text(out) == parse_text(text)
    assert format_source(SourceFile("t.wf", out)) == out


# --- the real formulas, through `dslc build` ---------------------------------------------------


def test_formulas_facts_through_dslc_build(tmp_path: Path) -> None:
    out = tmp_path / "formulas.json"
    result = CliRunner().invoke(cli, ["build", str(ROOT / "formulas"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    book = load_formulas(out)
    wan = book["wan2_2_t2v_a14b"]
    assert wan.uses["DenoisingStage"] == (
        ComponentUse("transformer", "forward"),
        ComponentUse("transformer_2", "forward"),
    )
    assert wan.stepped_stages == ("DenoisingStage",)
    assert wan.probe_axes == (("frames",), ("height", "width"))
    assert wan.call_arguments(steps=4, frames=17, height=256, width=256, cfg=False) == {
        "num_inference_steps": 4,
        "num_frames": 17,
        "height": 256,
        "width": 256,
        "guidance_scale": 1,
    }
    small = book["wan2_1_t2v_1_3b"]  # Wan 2.1: one transformer, guidance 5.0
    assert small.uses["DenoisingStage"] == (ComponentUse("transformer", "forward"),)
    assert small.call_arguments()["guidance_scale"] == 5
    i2v = book["wan2_1_i2v_14b"]
    assert i2v.uses["ImageEncodingStage"] == (
        ComponentUse("image_encoder", "forward"),
        ComponentUse("vae", "encode"),
    )
    assert book["wan2_2_i2v_a14b"].uses["ImageEncodingStage"] == (ComponentUse("vae", "encode"),)
    flux = book["flux1_dev"]
    assert flux.uses["TextEncodingStage"] == (
        ComponentUse("text_encoder", "forward"),
        ComponentUse("text_encoder_2", "forward"),
    )
    assert flux.probe_axes == (("height", "width"),)
    assert flux.call_arguments(cfg=True)["true_cfg_scale"] == 4
    assert flux.call_arguments()["true_cfg_scale"] == 1
    assert book["flux1_schnell"].call_arguments()["num_inference_steps"] == 4
    stepped = [book[name] for name in book if book[name].stepped_stages]
    assert stepped  # every pipeline with facts counts its steps in DenoisingStage
    for pipeline in stepped:
        assert pipeline.stepped_stages == ("DenoisingStage",), pipeline.name
        assert "num_inference_steps" in pipeline.call_names, pipeline.name
