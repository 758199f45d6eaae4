"""Typed, clear errors: one hierarchy, each naming the param, stage or constraint concerned."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, cast

import pytest

from artifact.errors import closest, one_of
from runtime import (
    EvaluationError,
    FormulaBook,
    FormulaError,
    InadmissibleError,
    ParamError,
    ParamTypeError,
    Pipeline,
    UnknownParamError,
    UnknownPipelineError,
    UnknownStageError,
    load_formulas,
)

from .builders import I, P, int_param, one_stage, op


class Index:
    """An int-like that is not an int (as numpy integers are)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


CALLS: dict[str, Callable[..., Any]] = {
    "iterations": lambda p, **kw: p.iterations("DenoisingStage", **kw),
    "general": lambda p, **kw: Pipeline.iterations(p, "DenoisingStage", **kw),
    "memory": lambda p, **kw: p.memory("DenoisingStage", **kw),
    "time": lambda p, **kw: p.time("DenoisingStage", **kw),
    "evaluate": lambda p, **kw: p.evaluate(**kw),
    "stage_iterations": lambda p, **kw: p.stage_iterations(probe=kw),
    "stage_iterations_target": lambda p, **kw: p.stage_iterations({}, target=kw),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_unknown_param_suggests_the_closest(wan: Pipeline, call: Callable[..., Any]) -> None:
    with pytest.raises(UnknownParamError) as info:
        call(wan, step=4)
    error = info.value
    assert (
        isinstance(error, ParamError)
        and isinstance(error, FormulaError)
        and isinstance(error, KeyError)
    )
    assert error.param == "step" and error.pipeline == "wan2_2_t2v_a14b"
    assert str(error) == (
        "pipeline 'wan2_2_t2v_a14b' has no param 'step'; did you mean 'steps'? "
        "(params: steps, frames, height, width, cfg)"
    )


@pytest.mark.parametrize("method", ["is_admissible", "violations"])
def test_unknown_param_in_admissibility_queries(wan: Pipeline, method: str) -> None:
    with pytest.raises(UnknownParamError, match="did you mean 'frames'"):
        getattr(wan, method)(frame=81)


def test_unknown_param_without_a_close_match(wan: Pipeline) -> None:
    with pytest.raises(UnknownParamError) as info:
        wan.iterations("DenoisingStage", zzz=1)
    assert "did you mean" not in str(info.value)


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
@pytest.mark.parametrize(
    ("params", "expected", "message"),
    [
        (
            {"steps": True},
            "int",
            "param 'steps' of pipeline 'wan2_2_t2v_a14b' takes an int; got True (bool)",
        ),
        (
            {"steps": 4.0},
            "int",
            "param 'steps' of pipeline 'wan2_2_t2v_a14b' takes an int; got 4.0 (float)",
        ),
        (
            {"steps": "4"},
            "int",
            "param 'steps' of pipeline 'wan2_2_t2v_a14b' takes an int; got '4' (str)",
        ),
        (
            {"steps": Fraction(4)},
            "int",
            "param 'steps' of pipeline 'wan2_2_t2v_a14b' takes an int; got 4 (Fraction)",
        ),
        ({"cfg": 1}, "bool", "param 'cfg' of pipeline 'wan2_2_t2v_a14b' takes a bool; got 1 (int)"),
        (
            {"cfg": None},
            "bool",
            "param 'cfg' of pipeline 'wan2_2_t2v_a14b' takes a bool; got None (NoneType)",
        ),
    ],
)
def test_wrong_types(
    wan: Pipeline,
    call: Callable[..., Any],
    params: dict[str, Any],
    expected: str,
    message: str,
) -> None:
    with pytest.raises(ParamTypeError) as info:
        call(wan, **params)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ParamError)
    assert info.value.expected == expected
    assert info.value.param == next(iter(params))
    assert str(info.value) == message


def test_int_likes_are_accepted(wan: Pipeline) -> None:
    # Typed as ints, as numpy integers reach the API from untyped code.
    assert wan.iterations("DenoisingStage", steps=cast(int, Index(7))) == 7
    assert wan.is_admissible(frames=cast(int, Index(80))) is False
    assert wan.largest_admissible("frames", at_most=cast(int, Index(60))) == 57


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
@pytest.mark.parametrize(
    ("params", "message", "nearest"),
    [
        ({"steps": 0}, "steps = 0 is outside [1, 1000]", "steps = 1"),
        ({"steps": 1001}, "steps = 1001 is outside [1, 1000]", "steps = 1000"),
        ({"frames": 80}, "frames = 80 violates `frames % 4 == 1`", "frames = 77 or 81"),
        (
            {"height": 724, "frames": 2},
            "frames = 2 violates `frames % 4 == 1`; height = 724 violates `height % 16 == 0`",
            "frames = 1 or 5; height = 720 or 736",
        ),
    ],
)
def test_inadmissible_points_name_param_and_constraint(
    wan: Pipeline, call: Callable[..., Any], params: dict[str, Any], message: str, nearest: str
) -> None:
    with pytest.raises(InadmissibleError) as info:
        call(wan, **params)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        f"point is not admissible for pipeline 'wan2_2_t2v_a14b': {message}"
        f" (nearest admissible: {nearest})"
    )
    assert info.value.violations == tuple(message.split("; "))
    assert info.value.suggestions == tuple(nearest.split("; "))
    assert info.value.param == info.value.params[0]
    for side in (0, -1):  # every value below (above) together: an admissible point
        fixed = {n: int(v.split(" or ")[side]) for n, _, v in map(_split, info.value.suggestions)}
        assert wan.is_admissible(**{**params, **fixed})


def _split(suggestion: str) -> tuple[str, str, str]:
    return suggestion.partition(" = ")


@pytest.mark.parametrize(
    "call",
    [
        lambda p: p.iterations("Denoising"),
        lambda p: Pipeline.iterations(p, "Denoising"),
        lambda p: p.memory("Denoising", steps=4),
        lambda p: p.time("Denoising"),
        lambda p: p.compiled_iterations("Denoising"),
        lambda p: p.compiled_memory("Denoising"),
        lambda p: p.compiled_time("Denoising"),
    ],
)
def test_unknown_stage_suggests_the_closest(wan: Pipeline, call: Callable[[Pipeline], Any]) -> None:
    with pytest.raises(UnknownStageError) as info:
        call(wan)
    assert isinstance(info.value, KeyError) and isinstance(info.value, FormulaError)
    assert info.value.stage == "Denoising"
    assert str(info.value) == (
        "pipeline 'wan2_2_t2v_a14b' has no stage 'Denoising'; did you mean 'DenoisingStage'? "
        "(stages: TextEncodingStage, DenoisingStage, DecodingStage)"
    )


def test_unknown_pipeline_keeps_mapping_semantics(book: FormulaBook) -> None:
    with pytest.raises(UnknownPipelineError) as info:
        book["wan2_2_t2v"]
    assert isinstance(info.value, KeyError) and isinstance(info.value, FormulaError)
    assert str(info.value) == (
        "no pipeline 'wan2_2_t2v' in the artifact; did you mean 'wan2_2_t2v_a14b', "
        "'wan2_1_t2v_dmd' or 'wan2_2_i2v_a14b'? "
        "(4 pipelines: list(book) names them, `dslc list ARTIFACT` shows them)"
    )
    assert info.value.closest[0] == "wan2_2_t2v_a14b"  # the name it begins comes first
    assert "nope" not in book
    assert book.get("nope") is None
    assert len(book) == 4


def test_closest_names_prefer_the_ones_a_name_begins() -> None:
    known = ("wan2_2_ti2v_5b", "wan2_2_t2v_a14b", "flux")
    assert closest("wan2_2_t2v", known)[0] == "wan2_2_t2v_a14b"
    assert closest("flux", known) == ("flux",)
    assert closest("zzz", known) == ()
    assert one_of(["a"]) == "'a'" and one_of(["a", "b", "c"]) == "'a', 'b' or 'c'"


def test_params_are_keyword_only(wan: Pipeline) -> None:
    with pytest.raises(TypeError, match="params by keyword only"):
        wan.iterations("DenoisingStage", 4)  # type: ignore[call-arg]


def test_largest_admissible_errors(wan: Pipeline) -> None:
    with pytest.raises(UnknownParamError):
        wan.largest_admissible("frame", at_most=60)
    with pytest.raises(ParamTypeError, match="needs an int param"):
        wan.largest_admissible("cfg", at_most=1)
    with pytest.raises(ParamTypeError):
        wan.largest_admissible("frames", at_most=True)
    with pytest.raises(ParamError, match="do not also pass it"):
        wan.largest_admissible("frames", at_most=60, frames=5)
    with pytest.raises(ParamTypeError):
        wan.largest_admissible("frames", at_most=60, cfg=0)


def test_largest_admissible_with_others(wan: Pipeline) -> None:
    assert wan.largest_admissible("height", at_most=100, width=64) == 96
    assert wan.largest_admissible("height", at_most=100, width=65) is None  # no height fixes width
    assert (
        wan.largest_admissible("height", at_most=100, steps=0) is None
    )  # another param out of range
    assert wan.largest_admissible("steps", at_most=10_000) == 1000


def test_largest_admissible_gives_up_after_a_bounded_walk() -> None:
    from .builders import contract

    doc = one_stage(
        params=[int_param("n", 0, 0, None)],
        contracts=[contract("n", "n % 100000 == 0", op("eq", op("mod", P("n"), I(100_000)), I(0)))],
    )
    p = load_formulas(doc)["p"]
    assert (
        p.largest_admissible("n", at_most=209_999) == 200_000
    )  # 9,999 values below: within the walk
    assert (
        p.largest_admissible("n", at_most=215_000) is None
    )  # 15,000 values away: more than the walk allows
    assert (
        p.largest_admissible("n", at_most=10**30 + 1) == 10**30
    )  # unbounded params: big ints stay exact
    assert p.largest_admissible("n", at_most=10**30 + 50_000) is None


def division_book() -> Pipeline:
    """iterations = steps / 2, memory = 100 // (steps - 2), time = 1 / (steps - 3)."""
    steps = P("steps")
    doc = one_stage(
        iterations=op("div", steps, I(2)),
        memory=op("floordiv", I(100), op("sub", steps, I(2))),
        time=op("div", I(1), op("sub", steps, I(3))),
        params=[int_param("steps", 40, 1, 100)],
    )
    return load_formulas(doc)["p"]


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda p: p.memory("S", steps=2), "S.memory"),
        (lambda p: Pipeline.memory(p, "S", steps=2), "S.memory"),
        (lambda p: p.time("S", steps=4 - 1), "S.time"),
        (lambda p: p.evaluate(steps=2), "S.memory"),
        (lambda p: Pipeline.time(p, "S", steps=3), "S.time"),
    ],
)
def test_division_by_zero_is_an_evaluation_error(
    call: Callable[[Pipeline], Any], what: str
) -> None:
    p = division_book()
    with pytest.raises(EvaluationError) as info:
        call(p)
    assert isinstance(info.value, ArithmeticError) and isinstance(info.value, FormulaError)
    assert info.value.what == what
    assert str(info.value).startswith(f"division by zero evaluating p.{what} at steps = ")


def test_raw_closures_raise_plain_zero_division() -> None:
    with pytest.raises(ZeroDivisionError):
        division_book().compiled_memory("S")(2)


def test_non_integer_or_negative_results_are_evaluation_errors() -> None:
    p = division_book()
    assert p.iterations("S", steps=4) == 2 and type(p.iterations("S", steps=4)) is int
    with pytest.raises(
        EvaluationError, match=r"p\.S\.iterations is 3/2, not a non-negative integer, at steps = 3"
    ):
        p.iterations("S", steps=3)
    with pytest.raises(EvaluationError, match="p.S.iterations is 3/2"):
        p.stage_iterations({"steps": 3})
    with pytest.raises(EvaluationError, match=r"p\.S\.time is -1, not non-negative"):
        p.time("S", steps=2)
    with pytest.raises(EvaluationError, match=r"p\.S\.time is -1, not non-negative"):
        Pipeline.time(p, "S", steps=2)


def test_stage_iterations_needs_a_mapping(wan: Pipeline) -> None:
    with pytest.raises(ParamError, match="expected a mapping"):
        wan.stage_iterations(probe=[("steps", 4)])  # type: ignore[arg-type]


def test_contracts_over_several_params_and_lets_on_the_fast_path() -> None:
    from .builders import L, contract, let

    h, w = P("h"), P("w")
    doc = one_stage(
        params=[int_param("h", 64, 1, 1000), int_param("w", 64, 1, 1000)],
        memory=op("mul", h, w),
        lets=[let("area", op("mul", h, w))],
        contracts=[
            contract("h", "h * w <= 10000", op("le", op("mul", h, w), I(10_000))),
            contract("w", "area % 2 == 0", op("eq", op("mod", L("area"), I(2)), I(0))),
        ],
    )
    p = load_formulas(doc)["p"]
    for point, expected in [
        ({"h": 100, "w": 100}, 10_000),
        ({"w": 2}, 128),
        ({"h": 3, "w": 4}, 12),
    ]:
        assert p.memory("S", **point) == expected == Pipeline.memory(p, "S", **point)
    for point, message in [
        ({"h": 101, "w": 100}, "h = 101 violates `h * w <= 10000`"),
        ({"h": 3, "w": 3}, "w = 3 violates `area % 2 == 0`"),
    ]:
        with pytest.raises(InadmissibleError) as info:
            p.memory("S", **point)
        assert info.value.violations == (message,)
    assert p.largest_admissible("w", at_most=1000, h=100) == 100
    assert p.largest_admissible("w", at_most=99, h=3) == 98
