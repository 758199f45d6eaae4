"""Hypothesis strategies and claims for property-testing formula files (public API for model
authors).

from hypothesis import given
from dslc.testing import admissible_params, assert_non_decreasing
from runtime import load_formulas

wan = load_formulas("build/formulas.json")["wan2_2_t2v_a14b"]

@given(admissible_params(wan))
def test_more_steps_never_mean_fewer_iterations(point):
    assert_non_decreasing(wan, "DenoisingStage", "steps", point)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Protocol

from hypothesis import assume
from hypothesis import strategies as st

from artifact.point import Point
from dslc import ast
from dslc.fmt import format_expr

_INF_SPAN = 10_000  # how far above its lower bound (or default) an unbounded param is drawn


class _ParamInfo(Protocol):
    name: str
    type: str
    default: int | bool
    min: int | None
    max: int | None


class PipelineLike(Protocol):
    """What the strategies need of a pipeline: `runtime.Pipeline` has all of it."""

    params: Mapping[str, Any]
    stages: tuple[str, ...]

    @property
    def default_workload(self) -> dict[str, int | bool]: ...
    def is_admissible(self, /, **params: int | bool) -> bool: ...
    def largest_admissible(
        self, name: str, at_most: int, /, **others: int | bool
    ) -> int | None: ...
    def iterations(self, stage: str, /, **params: int | bool) -> int: ...


# --------------------------------------------------------------------------- admissible points


def _int_candidates(info: _ParamInfo) -> st.SearchStrategy[int]:
    lo = info.min if info.min is not None else 0
    hi = info.max if info.max is not None else max(lo, int(info.default)) + _INF_SPAN
    default = int(info.default)
    edges = sorted({v for v in (lo, lo + 1, lo + 2, default, hi - 1, hi) if lo <= v <= hi})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


@st.composite
def admissible_params(
    draw: st.DrawFn, pipeline: PipelineLike, *, fixed: Point | None = None
) -> dict[str, int | bool]:
    """Points inside every range and contract, biased towards bounds, defaults and contract edges.

    Each int param is drawn near an edge or uniformly, then walked down to the largest admissible
    value at or below it (`largest_admissible`), so a contract admitting one value in a hundred
    costs one walk, not a hundred rejections.
    """
    point: dict[str, int | bool] = dict(pipeline.default_workload)
    point.update(fixed or {})
    names = [n for n in pipeline.params if n not in (fixed or {})]
    for name in draw(st.permutations(names)) if len(names) > 1 else names:
        info = pipeline.params[name]
        if info.type == "bool":
            point[name] = draw(st.booleans())
            continue
        wanted = draw(_int_candidates(info))
        others = {k: v for k, v in point.items() if k != name}
        value = pipeline.largest_admissible(name, wanted, **others)
        if value is None:  # nothing at or below `wanted` with these others: keep the current value
            continue
        point[name] = value
    assume(pipeline.is_admissible(**point))
    return point


# --------------------------------------------------------------------------- claims


def assert_non_decreasing(pipeline: PipelineLike, stage: str, param: str, point: Point) -> None:
    """`stage`'s iterations never drop when `param` grows to its next admissible value."""
    here = dict(point)
    info = pipeline.params[param]
    value = int(here[param])
    ceiling = info.max if info.max is not None else value + _INF_SPAN
    for bigger in range(value + 1, min(ceiling, value + 64) + 1):
        there = {**here, param: bigger}
        if pipeline.is_admissible(**there):
            before, after = pipeline.iterations(stage, **here), pipeline.iterations(stage, **there)
            assert after >= before, (
                f"{stage} iterations drop from {before} to {after} when {param} "
                f"grows from {value} to {bigger} at {here}"
            )
            return


def assert_probe_within_target(
    pipeline: PipelineLike,
    probe: Point,
    target: Point | None = None,
) -> None:
    """A probe never runs more iterations of any stage than its target does."""
    target = dict(target or pipeline.default_workload)
    for stage in pipeline.stages:
        measured, wanted = pipeline.iterations(stage, **probe), pipeline.iterations(stage, **target)
        assert measured <= wanted, (
            f"{stage}: the probe runs {measured} iterations, the target only {wanted}"
        )


# ---------------------------------------------------------------- expressions and sources


def _num(value: int | Fraction) -> ast.Num:
    return ast.Num(Fraction(value))


def _positive(expr: ast.Expr) -> ast.Expr:
    """`abs(e) + 1`: a divisor that can never be zero."""
    return ast.Binary("+", ast.Call("abs", (expr,)), _num(1))


def expressions(
    names: Sequence[str],
    *,
    max_leaves: int = 8,
    safe: bool = True,
    flags: Sequence[str] | None = None,
) -> st.SearchStrategy[ast.Expr]:
    """Well-typed numeric expressions over `names`; with `safe`, every divisor is `abs(..) + 1`.

    With `flags` (bool param or let names, possibly none), `if` conditions are whole boolean
    expressions (`conditions`) instead of one comparison.
    """
    leaves = st.one_of(
        st.integers(0, 12).map(_num),
        st.sampled_from([Fraction(1, 2), Fraction(3, 4), Fraction(29, 40)]).map(_num),
        *([st.sampled_from(list(names)).map(ast.Name)] if names else []),
    )

    tests = (
        conditions(expressions(names, max_leaves=2, safe=safe), flags)
        if flags is not None
        else None
    )

    def extend(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
        def divide(op: str) -> st.SearchStrategy[ast.Expr]:
            right = children.map(_positive) if safe else children
            return st.builds(lambda a, b: ast.Binary(op, a, b), children, right)

        return st.one_of(
            st.builds(
                lambda op, a, b: ast.Binary(op, a, b),
                st.sampled_from(["+", "-", "*"]),
                children,
                children,
            ),
            divide("/"),
            divide("//"),
            divide("%"),
            st.builds(lambda a, e: ast.Binary("**", a, _num(e)), children, st.integers(0, 3)),
            children.map(lambda a: ast.Unary("-", a)),
            st.builds(
                lambda f, a: ast.Call(f, (a,)), st.sampled_from(["ceil", "floor", "abs"]), children
            ),
            st.builds(
                lambda f, a, b: ast.Call(f, (a, b)),
                st.sampled_from(["min", "max"]),
                children,
                children,
            ),
            st.builds(
                lambda c, a, b: ast.IfElse(ast.Binary(c, a, b), a, b),
                st.sampled_from(["<", "<=", "==", "!=", ">", ">="]),
                children,
                children,
            ),
            *([st.builds(ast.IfElse, tests, children, children)] if tests is not None else []),
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves)


def conditions(
    numbers: st.SearchStrategy[ast.Expr], flags: Sequence[str] = (), *, max_leaves: int = 4
) -> st.SearchStrategy[ast.Expr]:
    """Boolean expressions: comparisons of `numbers`, `flags`, `true`/`false`, `not`, `and`, `or`,
    booleans compared with `==`/`!=` and boolean `if`s (what `explain` must print back exactly)."""
    leaves = st.one_of(
        st.builds(
            lambda op, a, b: ast.Binary(op, a, b),
            st.sampled_from(sorted(ast.COMPARISONS)),
            numbers,
            numbers,
        ),
        st.booleans().map(ast.Bool),
        *([st.sampled_from(list(flags)).map(ast.Name)] if flags else []),
    )

    def extend(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
        return st.one_of(
            children.map(lambda a: ast.Unary("not", a)),
            st.builds(
                lambda op, a, b: ast.Binary(op, a, b),
                st.sampled_from(["and", "or", "==", "!="]),
                children,
                children,
            ),
            st.builds(ast.IfElse, children, children, children),
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves)


@st.composite
def _param_decl(draw: st.DrawFn, name: str) -> str:
    lo = draw(st.integers(0, 8))
    hi = lo + draw(st.integers(0, 200))
    default = draw(st.integers(lo, hi))
    text = f"param {name}: int = {default} in [{lo}, {hi}]"
    if draw(st.booleans()):
        modulus = draw(st.integers(2, 8))
        text += f" where {name} % {modulus} == {default % modulus}"
    return text


# How many terms a generated memory or time has: mostly one, sometimes a list of two or three.
_TERMS = st.sampled_from([1, 1, 2, 3])


@st.composite
def sources(
    draw: st.DrawFn, *, max_params: int = 3, max_stages: int = 3, booleans: bool = False
) -> str:
    """A whole `.wf` pipeline that compiles clean by construction (iterations are `max(0,
    floor(..))`, measures `abs(..)`; a memory or a time is sometimes a list of terms).

    With `booleans`, `if` conditions are whole boolean expressions over bool params and bool lets.
    """
    params = [f"p{i}" for i in range(draw(st.integers(1, max_params)))]
    lines = [draw(_param_decl(name)) for name in params]
    has_flag = draw(st.booleans())
    if has_flag:
        lines.append("param flag: bool = " + draw(st.sampled_from(["true", "false"])))
    names = list(params)
    flags = ["flag"] if has_flag else []
    for index in range(draw(st.integers(0, 2))):
        if booleans and draw(st.booleans()):
            condition = draw(conditions(expressions(names, max_leaves=3), flags))
            lines.append(f"let c{index} = {format_expr(condition)}")
            flags.append(f"c{index}")
            continue
        lines.append(f"let l{index} = {format_expr(draw(expressions(names)))}")
        names.append(f"l{index}")

    def expression() -> str:
        return format_expr(draw(expressions(names, flags=flags if booleans else None)))

    for index in range(draw(st.integers(1, max_stages))):
        iterations = expression()
        terms = [f"abs({expression()})" for _ in range(draw(_TERMS))]
        memory = terms[0] if len(terms) == 1 else "[" + ", ".join(terms) + "]"
        times = [expression() for _ in range(draw(_TERMS))]
        times = [
            f"if flag then abs({t}) else abs({t}) + 1" if has_flag else f"abs({t})" for t in times
        ]
        time = times[0] if len(times) == 1 else "[" + ", ".join(times) + "]"
        lines.append(
            f"stage S{index} {{ iterations = max(0, floor({iterations})); memory ~ {memory}; "
            f"time ~ {time} }}"
        )
    body = "\n".join(f"    {line}" for line in lines)
    return f"pipeline generated {{\n{body}\n}}\n"
