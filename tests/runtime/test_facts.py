"""The loader reads pipeline facts (stage `uses`/`per_step`, `calls`, `probe_axes`) and refuses
malformed ones by path; artifacts without them load as before."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest

from runtime import ArtifactError, ComponentUse, EvaluationError, load_formulas

from .builders import SPAN, B, F, I, P, bool_param, document, int_param, op, pipeline, stage


def facts_doc() -> dict[str, Any]:
    """A pipeline with every fact: two stages with uses, one per step, three calls, two groups."""
    encode = stage("TextEncodingStage", I(1))
    encode["uses"] = [{"component": "text_encoder", "method": "forward"}]
    denoise = stage("DenoisingStage", P("steps"))
    denoise["uses"] = [{"component": "transformer", "method": "forward"}]
    denoise["per_step"] = True
    params = [
        int_param("steps", 40, 1, 1000),
        int_param("height", 64, 16, 4096),
        int_param("width", 64, 16, 4096),
        bool_param("cfg", True),
    ]
    doc = document(pipeline("p", params, [encode, denoise]))
    doc["pipelines"][0]["calls"] = [
        {"arg": "num_inference_steps", "expr": P("steps"), "span": SPAN},
        {"arg": "guidance_scale", "expr": op("if", P("cfg"), I(5), I(1)), "span": SPAN},
        {"arg": "ratio", "expr": op("div", P("width"), P("height")), "span": SPAN},
        {"arg": "do_cfg", "expr": P("cfg"), "span": SPAN},
    ]
    doc["pipelines"][0]["probe_axes"] = [["height", "width"], ["steps"]]
    return doc


def test_facts_load() -> None:
    p = load_formulas(facts_doc())["p"]
    assert p.uses == {
        "TextEncodingStage": (ComponentUse("text_encoder", "forward"),),
        "DenoisingStage": (ComponentUse("transformer", "forward"),),
    }
    assert p.stepped_stages == ("DenoisingStage",)
    assert p.call_names == ("num_inference_steps", "guidance_scale", "ratio", "do_cfg")
    assert p.call_arguments() == {
        "num_inference_steps": 40,
        "guidance_scale": 5,
        "ratio": 1,
        "do_cfg": True,
    }
    assert p.call_arguments(width=96, cfg=False)["ratio"] == Fraction(3, 2)
    assert p.probe_axes == (("height", "width"), ("steps",))
    assert ComponentUse("vae", "decode") == ComponentUse(component="vae", method="decode")


def test_old_artifacts_have_no_facts() -> None:
    p = load_formulas(document(pipeline("p", [int_param("steps", 4)], [stage("S")])))["p"]
    assert (p.uses, p.stepped_stages, p.call_names, p.probe_axes) == ({"S": ()}, (), (), ())
    assert p.call_arguments() == {}


def _edit(path: list[Any], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(facts_doc())
    target: Any = doc["pipelines"][0]
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


BAD = [
    (["stages", 0, "uses"], [], "pipelines[0].stages[0].uses", "expected 1 to 16 uses, got 0"),
    (
        ["stages", 0, "uses"],
        [{"component": "a", "method": "forward"}] * 17,
        "pipelines[0].stages[0].uses",
        "expected 1 to 16 uses, got 17",
    ),
    (
        ["stages", 0, "uses", 0, "component"],
        "a.b",
        "pipelines[0].stages[0].uses[0].component",
        "invalid name 'a.b'",
    ),
    (
        ["stages", 0, "uses", 0],
        {"component": "a"},
        "pipelines[0].stages[0].uses[0]",
        "missing key 'method'",
    ),
    (
        ["stages", 0, "uses", 0, "component"],
        "transformer",
        "pipelines[0].stages[1].uses[0]",
        "transformer.forward already opens stage 'TextEncodingStage'",
    ),
    (
        ["stages", 0, "per_step"],
        True,
        "pipelines[0].stages[1].per_step",
        "stage 'TextEncodingStage' is per step already",
    ),
    (
        ["stages", 1, "per_step"],
        False,
        "pipelines[0].stages[1].per_step",
        "expected true (the key is omitted when false), got a boolean False",
    ),
    (["stages", 0, "usage"], [], "pipelines[0].stages[0]", "unexpected key 'usage'"),
    (["calls"], {}, "pipelines[0].calls", "expected a list, got an object"),
    (
        ["calls", 1, "arg"],
        "num_inference_steps",
        "pipelines[0].calls[1].arg",
        "duplicate call argument 'num_inference_steps'",
    ),
    (["calls", 0, "arg"], "not a name", "pipelines[0].calls[0].arg", "invalid name"),
    (
        ["calls", 0, "expr"],
        P("frames"),
        "pipelines[0].calls[0].expr.name",
        "unknown param 'frames'",
    ),
    (
        ["calls", 0, "expr"],
        op("add", P("cfg"), I(1)),
        "pipelines[0].calls[0].expr.args[0]",
        "'add' needs a number here, got a boolean",
    ),
    (["calls", 0, "span"], None, "pipelines[0].calls[0].span", "expected an object, got null"),
    (
        ["calls"],
        [{"arg": f"a{i}", "expr": I(1), "span": SPAN} for i in range(513)],
        "pipelines[0].calls",
        "expected at most 512 calls, got 513",
    ),
    (["probe_axes", 0], [], "pipelines[0].probe_axes[0]", "a probe group names at least one"),
    (
        ["probe_axes", 1, 0],
        "cfg",
        "pipelines[0].probe_axes[1][0]",
        "probe axis 'cfg' is a bool param; axes are int params",
    ),
    (
        ["probe_axes", 1, 0],
        "frames",
        "pipelines[0].probe_axes[1][0]",
        "probe axis 'frames' is not a param; axes are int params",
    ),
    (
        ["probe_axes", 1, 0],
        "height",
        "pipelines[0].probe_axes[1][0]",
        "probe axis 'height' is in two groups",
    ),
    (["probe_axes"], [["steps"], "x"], "pipelines[0].probe_axes[1]", "expected a list"),
]


@pytest.mark.parametrize(("path", "value", "where", "message"), BAD)
def test_malformed_facts_name_the_field(
    path: list[Any], value: Any, where: str, message: str
) -> None:
    with pytest.raises(ArtifactError) as info:
        load_formulas(_edit(path, value))
    assert info.value.path == where
    assert info.value.problem.startswith(message), info.value.problem


def test_a_call_dividing_by_zero_at_the_default_workload_is_a_broken_artifact() -> None:
    doc = _edit(["calls", 2, "expr"], op("div", P("width"), op("sub", P("height"), I(64))))
    with pytest.raises(ArtifactError) as info:
        load_formulas(doc)
    assert info.value.path == "pipelines[0].calls"
    assert "division by zero" in info.value.problem


def test_a_call_dividing_by_zero_elsewhere_is_an_evaluation_error() -> None:
    doc = _edit(["calls", 2, "expr"], op("div", P("width"), op("sub", P("height"), I(32))))
    p = load_formulas(doc)["p"]
    assert p.call_arguments()["ratio"] == 2
    with pytest.raises(EvaluationError, match=r"division by zero evaluating p\.calls"):
        p.call_arguments(height=32)


def test_call_of_a_fraction_constant_and_a_bool_constant() -> None:
    doc = _edit(["calls"], [{"arg": "a", "expr": F(1, 3), "span": SPAN}])
    doc["pipelines"][0]["calls"].append({"arg": "b", "expr": B(False), "span": SPAN})
    assert load_formulas(doc)["p"].call_arguments() == {"a": Fraction(1, 3), "b": False}
