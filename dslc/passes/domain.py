"""Domains: constant ranges and defaults evaluated, ranges non-empty, the default workload
admissible.
"""

from __future__ import annotations

from fractions import Fraction

import attrs

from artifact.spelling import point_text
from dslc import ast
from dslc.codes import Code
from dslc.diagnostics import Diagnostic, error
from dslc.fmt import format_expr
from dslc.interp import EvalError, Interpreter, evaluate
from dslc.model import ResolvedParam, ResolvedPipeline


def _constant(expr: ast.Expr, what: str, problems: list[Diagnostic]) -> int | bool | None:
    try:
        value = evaluate(expr)
    except EvalError as exc:
        code = Code.DIVISION_BY_ZERO if "zero" in str(exc) else Code.TYPE
        problems.append(error(code, f"{what} cannot be evaluated: {exc}", exc.node.span))
        return None
    if isinstance(value, Fraction):
        if value.denominator != 1:
            problems.append(error(Code.TYPE, f"{what} must be an integer, not {value}", expr.span))
            return None
        return int(value)
    return value if isinstance(value, bool) else None


def _resolve_param(param: ResolvedParam, problems: list[Diagnostic]) -> ResolvedParam | None:
    default = _constant(param.default_decl.default, f"the default of '{param.name}'", problems)
    if param.type == "bool":
        return attrs.evolve(param, default=default) if isinstance(default, bool) else None
    lo = 0 if param.decl.lo is None else _constant(param.decl.lo, "a range's lower bound", problems)
    hi_expr = param.decl.hi
    hi = (
        None
        if hi_expr is None or isinstance(hi_expr, ast.Inf)
        else _constant(hi_expr, "a range's upper bound", problems)
    )
    if (
        not isinstance(default, int)
        or not isinstance(lo, int)
        or (hi is not None and not isinstance(hi, int))
    ):
        return None
    if hi is not None and lo > hi:
        lo_span = param.decl.lo.span if param.decl.lo is not None else None
        hi_span = hi_expr.span if hi_expr is not None else None
        span = lo_span.to(hi_span) if lo_span is not None and hi_span is not None else lo_span
        problems.append(
            error(
                Code.DOMAIN,
                f"the range [{lo}, {hi}] of '{param.name}' is empty",
                span,
                hints=["write the bounds low first: 'in [LO, HI]'"],
            )
        )
        return None
    if default < lo or (hi is not None and default > hi):
        shown = f"[{lo}, {'inf' if hi is None else hi}]"
        problems.append(
            error(
                Code.DOMAIN,
                f"the default {default} of '{param.name}' lies outside {shown}",
                param.default_decl.default.span,
            )
        )
        return None
    return attrs.evolve(param, default=default, lo=lo, hi=hi)


def resolve_params(pipeline: ResolvedPipeline) -> tuple[ResolvedPipeline | None, list[Diagnostic]]:
    """Each param's default and range, evaluated (constants only: nothing else is evaluated yet)."""
    problems: list[Diagnostic] = []
    params = [_resolve_param(p, problems) for p in pipeline.params]
    if problems or any(p is None for p in params):
        return None, problems
    resolved = attrs.evolve(pipeline, params=tuple(p for p in params if p is not None))
    problems = _probe_minimums(resolved)
    return (None if problems else resolved), problems


def _probe_minimums(pipeline: ResolvedPipeline) -> list[Diagnostic]:
    """A declared probe minimum (`probe frames >= 9`) lies within its param's range."""
    problems = []
    for probe in pipeline.probes:
        for index, name in enumerate(probe.names):
            minimum, param = probe.minimum(index), pipeline.param(name)
            if minimum is None or param is None or param.hi is None or minimum <= param.hi:
                continue
            span = probe.minimum_spans[index] if index < len(probe.minimum_spans) else probe.span
            problems.append(
                error(
                    Code.DOMAIN,
                    f"the probe minimum {name} >= {minimum} lies above the range "
                    f"[{param.lo}, {param.hi}] of '{name}': no probe could run",
                    span,
                )
            )
    return problems


def check_default_workload(resolved: ResolvedPipeline) -> list[Diagnostic]:
    """The default workload satisfies every contract (run after the cost pass bounded them)."""
    problems: list[Diagnostic] = []
    point = {
        p.name: p.default if isinstance(p.default, bool) else Fraction(p.default)
        for p in resolved.params
    }
    interpreter = Interpreter(point, resolved.lets)
    shown = point_text(resolved.default_workload, sep=", ", eq=" = ")
    for param, where in resolved.contracts:
        try:
            holds = interpreter.eval(where)
        except EvalError as exc:
            problems.append(
                error(
                    Code.DIVISION_BY_ZERO if "zero" in str(exc) else Code.TYPE,
                    f"contract of '{param.name}' fails at the default workload: {exc}",
                    exc.node.span,
                )
            )
            continue
        if holds is not True:
            problems.append(
                error(
                    Code.DOMAIN,
                    f"the default workload violates '{format_expr(where)}'",
                    where.span,
                    hints=[f"the default workload is {shown}"],
                )
            )
    return problems
