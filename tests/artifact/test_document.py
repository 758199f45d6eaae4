"""The loader validates every field and limit of docs/artifact.md, naming what is wrong and
where.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from artifact.document import MAX_BYTES, MAX_DEPTH
from runtime import ArtifactError, FormulaError, load_formulas
from tests.runtime.builders import I, P, int_param, one_stage, op
from tests.runtime.conftest import DATA, WAN_PATH

CASES = json.loads((DATA / "invalid_artifacts.json").read_text())["cases"]


def apply(doc: Any, case: dict[str, Any]) -> Any:
    for key in ("set", "delete"):
        if key not in case:
            continue
        pointer = case[key][0]
        target = doc
        for step in pointer[:-1]:
            target = target[step]
        if key == "set" and isinstance(target, list) and pointer[-1] == len(target):
            target.append(case[key][1])
        elif key == "set":
            target[pointer[-1]] = case[key][1]
        else:
            del target[pointer[-1]]
    return doc


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_malformed_artifacts_name_the_field(case: dict[str, Any]) -> None:
    doc = apply(json.loads(WAN_PATH.read_text()), case)
    for source in (doc, json.dumps(doc)):
        with pytest.raises(ArtifactError) as info:
            load_formulas(source)
        assert isinstance(info.value, FormulaError) and isinstance(info.value, ValueError)
        assert info.value.path == case["path"]
        assert info.value.problem.startswith(case["message"]), info.value.problem
        where = f"at {case['path']}: " if case["path"] else ""
        assert str(info.value) == f"invalid workload-formulas artifact: {where}{info.value.problem}"


def test_the_fixture_itself_is_valid() -> None:
    assert len(load_formulas(WAN_PATH)) == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "{",
            (
                "not valid JSON: Expecting property name enclosed in double quotes: "
                "line 1 column 2 (char 1)"
            ),
        ),
        ('{"a": NaN}', "not valid JSON: NaN is not valid JSON"),
        ('{"a": Infinity}', "not valid JSON: Infinity is not valid JSON"),
        ('{"a": 1, "a": 2}', "not valid JSON: duplicate key 'a' in a JSON object"),
        (b"{\xff}", "not valid JSON"),
        ("[]", "expected a JSON object at the top level, got a list"),
    ],
)
def test_invalid_json(text: str | bytes, message: str) -> None:
    with pytest.raises(ArtifactError) as info:
        load_formulas(text)
    assert info.value.problem.startswith(message)


def nested(depth: int) -> dict[str, Any]:
    """`neg(neg(...(steps)))`: a tree `depth` nodes deep, built without recursion."""
    node: dict[str, Any] = P("steps")
    for _ in range(depth - 1):
        node = op("neg", node)
    return node


def test_deepest_allowed_tree_loads_and_evaluates() -> None:
    # 200 nodes deep in a let, one more level in the stage: both at the limit of their own tree.
    doc = one_stage(memory=op("abs", nested(MAX_DEPTH - 1)))
    assert load_formulas(doc)["p"].memory("S", steps=7) == 7
    doc = one_stage(memory=op("mul", nested(MAX_DEPTH - 1), nested(MAX_DEPTH - 1)))
    assert load_formulas(json.dumps(doc))["p"].memory("S", steps=3) == 9


def test_deepest_lets_and_contracts_compile_into_helpers() -> None:
    from tests.runtime.builders import contract, let

    deep_let = let("v", nested(MAX_DEPTH))  # neg applied 199 times to steps: -steps
    deep_contract = contract("steps", "deep", op("gt", nested(MAX_DEPTH - 1), I(0)))  # steps > 0
    doc = one_stage(
        memory=op("neg", {"k": "let", "name": "v"}), lets=[deep_let], contracts=[deep_contract]
    )
    p = load_formulas(doc)["p"]
    assert " h0(" in p.source  # deeper than Python's parser allows in one expression
    assert p.memory("S", steps=9) == 9
    assert p.is_admissible(steps=1)
    assert p.violations(steps=0) == ("steps = 0 is outside [1, 1000]", "steps = 0 violates `deep`")
    assert p.iterations("S", steps=7) == 1


def test_too_deep_tree_is_rejected_with_its_path() -> None:
    doc = one_stage(memory=nested(MAX_DEPTH + 1))
    with pytest.raises(ArtifactError) as info:
        load_formulas(json.dumps(doc))
    assert info.value.problem == f"expression nested deeper than {MAX_DEPTH} levels"
    assert info.value.path == "pipelines[0].stages[0].memory.expr" + ".args[0]" * MAX_DEPTH


def test_hundred_thousand_deep_json_is_an_artifact_error_not_a_recursion_error() -> None:
    depth = 100_000
    text = '{"k": "neg", "args": [' * depth + '{"k": "int", "v": 1}' + "]}" * depth
    doc_text = json.dumps(one_stage(memory=I(0))).replace('{"k": "int", "v": 0}', text)
    with pytest.raises(ArtifactError, match="nested too deeply"):
        load_formulas(doc_text)


def test_hundred_thousand_deep_mapping_is_an_artifact_error() -> None:
    doc = one_stage()
    doc["pipelines"][0]["stages"][0]["memory"]["expr"] = nested(100_000)  # (deepcopy would recurse)
    with pytest.raises(ArtifactError, match="nested deeper than 200"):
        load_formulas(doc)


def test_int_digit_limit() -> None:
    ok = one_stage(memory=I(10**4300 - 1))
    assert load_formulas(ok)["p"].memory("S") == 10**4300 - 1
    with pytest.raises(ArtifactError, match="integer has more than 4300 digits"):
        load_formulas(one_stage(memory=I(10**4300)))
    text = json.dumps(one_stage(memory=I(0))).replace('"v": 0', '"v": ' + "9" * 5000)
    with pytest.raises(ArtifactError, match="not valid JSON"):
        load_formulas(text)


def test_file_size_limit(tmp_path: Path) -> None:
    text = json.dumps(one_stage())
    big = tmp_path / "big.json"
    big.write_text(text + " " * (MAX_BYTES + 1 - len(text)))
    with pytest.raises(ArtifactError, match="over the 16777216-byte limit"):
        load_formulas(big)
    with pytest.raises(ArtifactError, match="over the 16777216-byte limit"):
        load_formulas(big.read_text())
    exact = tmp_path / "exact.json"
    exact.write_text(text + " " * (MAX_BYTES - len(text)))
    assert len(load_formulas(exact)) == 1


def test_constant_contract_and_unbounded_range() -> None:
    from tests.runtime.builders import B, contract

    doc = one_stage(
        params=[int_param("n", 5, -3, None)],
        memory=op("abs", P("n")),
        contracts=[contract("n", "true", B(True))],
    )
    p = load_formulas(doc)["p"]
    assert p.params["n"].range_text == "[-3, inf]"
    assert p.memory("S", n=-3) == 3
    assert p.memory("S", n=10**40) == 10**40
    assert p.violations(n=-4) == ("n = -4 is outside [-3, inf]",)


def test_the_node_count_is_bounded_across_the_artifact() -> None:
    from artifact.document import MAX_NODES

    # Within the byte limit, but over the node limit: refused before any code is generated.
    wide = one_stage(memory=op("max", *[I(1)] * (MAX_NODES + 1)))
    with pytest.raises(ArtifactError) as info:
        load_formulas(json.dumps(wide))
    assert f"over {MAX_NODES:,} expression nodes" in str(info.value)
    assert info.value.path == "pipelines[0].stages[0].memory.expr.args"
    # The budget is shared: two stages of 60 % each are refused at the second.
    half = op("max", *[I(1)] * (MAX_NODES * 3 // 5))
    doc = one_stage(memory=half)
    doc["pipelines"][0]["stages"].append({**doc["pipelines"][0]["stages"][0], "name": "T"})
    with pytest.raises(ArtifactError) as info:
        load_formulas(doc)
    assert info.value.path == "pipelines[0].stages[1].memory.expr.args"
    # Just under the limit loads.
    assert (
        load_formulas(one_stage(memory=op("max", *[I(1)] * (MAX_NODES - 1))))["p"].memory("S") == 1
    )
