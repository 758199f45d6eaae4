"""Resolution and flattening: `extends`, overrides, lets in any order, and collected errors."""

from __future__ import annotations

from dslc.compiler import compile_sources, compile_text
from dslc.fmt import format_expr
from dslc.source import SourceFile
from tests.dslc.documents import artifact
from tests.examples import LANGUAGE_EXAMPLE


def compiled(text: str):
    result = compile_text(text, "t.wf")
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.program is not None
    return result.program


def test_language_example_compiles_clean_and_flattens() -> None:
    result = compile_text(LANGUAGE_EXAMPLE, "wan.wf")
    assert result.diagnostics == ()
    program = result.program
    assert program is not None
    i2v = program.pipeline("wan2_2_i2v_a14b")
    assert i2v is not None
    assert [s.name for s in i2v.stages] == [
        "TextEncodingStage",
        "DenoisingStage",
        "DecodingStage",
        "ImageEncodingStage",
    ]
    dmd = program.pipeline("wan2_1_t2v_dmd")
    assert dmd is not None
    assert dmd.default_workload == {
        "steps": 4,
        "frames": 81,
        "height": 720,
        "width": 1280,
        "cfg": True,
    }
    steps = dmd.param("steps")
    assert steps is not None and (steps.lo, steps.hi) == (1, 1000)  # type and domain stay
    denoise = dmd.stages[1]
    assert format_expr(denoise.fields["iterations"].value) == "len(schedule)"
    assert (
        format_expr(denoise.fields["memory"].value) == "tokens"
    )  # field-wise override keeps the rest


def test_full_param_replacement_and_let_replacement() -> None:
    program = compiled("""
pipeline base {
    param steps: int = 40 in [1, 1000]
    let scale = 2
    stage S { iterations = steps * scale }
}
pipeline child extends base {
    param steps: int = 8 in [8, 16] where steps % 8 == 0
    let scale = 3
}
""")
    child = program.pipeline("child")
    steps = child.param("steps")
    assert (steps.default, steps.lo, steps.hi) == (8, 8, 16)
    assert steps.where is not None
    assert format_expr(child.let("scale").value) == "3"


def test_lets_may_come_in_any_order_and_are_emitted_in_dependency_order() -> None:
    program = compiled("""
pipeline p {
    stage S { iterations = c }
    let c = b + 1
    let b = a * 2
    let a = steps
    param steps: int = 4
}
""")
    doc = artifact(program)
    assert [let["name"] for let in doc["pipelines"][0]["lets"]] == ["a", "b", "c"]


def test_parents_may_live_in_other_files() -> None:
    parent = SourceFile(
        "parent.wf", "pipeline base { param steps: int = 40\n stage S { iterations = steps } }"
    )
    child = SourceFile("child.wf", "pipeline fast extends base { param steps = 4 }")
    result = compile_sources([child, parent])
    assert result.ok and result.program is not None
    fast = result.program.pipeline("fast")
    assert fast is not None and fast.default_workload == {"steps": 4}


def test_every_error_of_a_run_is_reported_not_just_the_first() -> None:
    result = compile_text(
        """
pipeline a { stage S { iterations = nope } }
pipeline b { param steps: int = 0 in [1, 2] }
pipeline c { param cfg: bool = true
    stage S { iterations = cfg + 1 } }
""",
        "many.wf",
    )
    assert [d.code for d in result.errors] == ["undefined-name", "domain", "type"]
    assert result.program is None


def test_lists_fold_away_in_the_artifact() -> None:
    program = compiled("""
pipeline p {
    let schedule = [1000, 750, 500, 250]
    stage S { iterations = len(schedule); memory ~ sum(schedule) / 100; time ~ max(schedule) }
}
""")
    (stage,) = artifact(program)["pipelines"][0]["stages"]
    assert stage["iterations"]["expr"] == {"k": "int", "v": 4}
    assert "list" not in str(artifact(program))
