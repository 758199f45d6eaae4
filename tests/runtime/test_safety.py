"""Nothing taken from the artifact is ever executed: tampered files are refused or inert."""

from __future__ import annotations

import io
import json
import re
import tokenize
from pathlib import Path
from typing import Any

import pytest

from runtime import ArtifactError, InadmissibleError, Pipeline, load_formulas

from .builders import B, I, L, P, bool_param, contract, int_param, let, one_stage, op
from .conftest import WAN_PATH

CODE = "__import__('os').system('touch {marker}')"

# Every name the generated source may contain: keywords, internal helpers, index-named variables.
ALLOWED_NAME = re.compile(
    r"(def|return|try|except|if|else|and|or|not|is|True|False|None"
    r"|_[A-Za-z]+\d?|[pdclhkv]\d+|s\d+[ft]\d+|iters|every|lets|ok|checked|get|f)\Z"
)


def audit(pipeline: Pipeline) -> None:
    """The generated source holds no string literal and only the names the generator makes up."""
    tokens = list(tokenize.generate_tokens(io.StringIO(pipeline.source).readline))
    for token in tokens:
        assert token.type != tokenize.STRING, token
        if token.type == tokenize.NAME:
            assert ALLOWED_NAME.match(token.string), token.string
        if token.type == tokenize.NUMBER:
            assert token.string.isdigit(), token.string
    assert pipeline.compiled_iterations(pipeline.stages[0]).__globals__["__builtins__"] == {}


def test_generated_source_of_the_wan_fixture_is_clean() -> None:
    for pipeline in load_formulas(WAN_PATH).values():
        audit(pipeline)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (["pipelines", 0, "name"], CODE),
        (["pipelines", 0, "params", 0, "name"], CODE),
        (["pipelines", 0, "lets", 0, "name"], CODE),
        (["pipelines", 0, "stages", 0, "name"], CODE),
        (["pipelines", 0, "stages", 1, "iterations", "expr", "name"], CODE),
        (["pipelines", 0, "stages", 1, "iterations", "expr", "k"], CODE),
        (["pipelines", 0, "stages", 1, "iterations", "expr"], {"k": "int", "v": CODE}),
        (
            ["pipelines", 0, "stages", 1, "iterations", "expr"],
            {"k": "pow", "args": [I(2)], "exp": CODE},
        ),
        (["pipelines", 0, "stages", 1, "iterations", "expr"], {"k": "frac", "n": CODE, "d": 3}),
        (
            ["pipelines", 0, "stages", 1, "iterations", "expr"],
            {"k": "add", "args": [I(1), I(2)], "code": CODE},
        ),
        (["pipelines", 0, "stages", 1, "iterations", "expr"], CODE),
        (["pipelines", 0, "contracts", 0, "param"], CODE),
    ],
)
def test_code_in_the_file_is_refused(tmp_path: Path, where: list[Any], value: Any) -> None:
    marker = tmp_path / "pwned"
    doc = json.loads(WAN_PATH.read_text())
    target = doc
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = json.loads(json.dumps(value).replace("{marker}", str(marker)))
    with pytest.raises(ArtifactError):
        load_formulas(json.dumps(doc))
    assert not marker.exists()


def test_contract_text_is_shown_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = CODE.format(marker=marker)
    doc = one_stage(contracts=[contract("steps", text, op("le", P("steps"), I(100)))])
    p = load_formulas(doc)["p"]
    assert text not in p.source and "import" not in p.source
    assert p.violations(steps=101) == (f"steps = 101 violates `{text}`",)
    with pytest.raises(InadmissibleError):
        p.iterations("S", steps=101)
    assert not marker.exists()
    audit(p)


def test_names_that_are_keywords_or_look_internal_are_plain_data() -> None:
    names = ["p1", "p0", "stage", "params", "_", "_s", "d0", "_type", "lambda", "if"]
    params = [int_param(n, i + 1, 0, 100) for i, n in enumerate(names)] + [
        bool_param("True", False)
    ]
    memory = op("if", P("True"), op("add", P("lambda"), P("if")), op("sub", P("p0"), P("p1")))
    doc = one_stage(
        iterations=op("add", P("stage"), L("l0")),
        memory=memory,
        params=params,
        lets=[let("l0", op("mul", P("_"), P("d0")))],
    )
    p = load_formulas(doc)["p"]
    audit(p)
    assert p.memory("S") == 2 - 1
    assert p.memory("S", p1=3, p0=10) == 7
    assert p.memory("S", **{"True": True, "lambda": 5, "if": 6}) == 11
    assert p.iterations("S", stage=10, _=2, d0=3) == 16
    assert p.iterations("S") == 3 + 5 * 7
    assert Pipeline.iterations(p, "S", stage=10, _=2, d0=3) == 16
    assert p.stage_iterations({"stage": 0}) == {"S": (35, 38)}
    assert p.violations(_s=101) == ("_s = 101 is outside [0, 100]",)
    with pytest.raises(InadmissibleError):
        p.iterations("S", _type=-1)


def test_generated_source_survives_hostile_numbers() -> None:
    big = 10**4000
    doc = one_stage(
        memory=op("add", op("mul", P("steps"), I(-big)), I(big * 41)),
        time=op("if", B(False), I(-1), op("pow", I(-3), exp=2)),
    )
    p = load_formulas(doc)["p"]
    audit(p)
    assert p.memory("S") == big
    assert p.time("S") == 9
    assert str(big)[:50] not in p.source
