"""What the prover says about an obligation it refuted or could not prove, and about a file
whose pipelines spent its work budget: each a diagnostic with the place and the fix."""

from __future__ import annotations

from artifact.spelling import proof_value
from dslc import ast
from dslc.codes import Code
from dslc.diagnostics import Diagnostic, error, warning
from dslc.fmt import format_expr
from dslc.model import ResolvedPipeline
from dslc.passes.obligations import DIVISOR, NONNEG, Obligation

MAX_QUOTED = 40  # an expression quoted in a message has at most this many characters


def over_budget(pipeline: ResolvedPipeline, budget: int) -> Diagnostic:
    """A file whose pipelines took the prover's whole budget: the rest are not checked."""
    return error(
        Code.LIMIT,
        f"the prover's work budget for this file ({budget:,} evaluations) is "
        f"spent before pipeline '{pipeline.name}'",
        pipeline.decl.name_span,
        hints=["split the pipelines across several files, or simplify their formulas"],
    )


def refuted(ob: Obligation, where: str) -> Diagnostic:
    """A counterexample found: the error naming the point (`where`) and how to rule it out."""
    assert ob.refuted is not None
    if ob.kind == DIVISOR:
        assert isinstance(ob.node, ast.Binary)
        what = "modulo" if ob.node.op == "%" else "division"
        divisor = quoted(ob.node.right, "DIVISOR")
        return error(
            Code.DIVISION_BY_ZERO,
            f"{what} by zero in {ob.what}{where}",
            ob.node.right.span,
            hints=[
                (
                    f"guard it with 'if {divisor} != 0 then ... else ...', or exclude such "
                    f"workloads with a range or a 'where' contract"
                )
            ],
        )
    value = ob.refuted[1]
    shown = proof_value(value)
    said = f"{ob.what} is {shown}{where}" if where else f"{ob.what} is always {shown}"
    if ob.kind == NONNEG:
        return error(
            Code.NEGATIVE,
            said,
            ob.node.span,
            hints=[
                (
                    "clamp it with 'max(0, ...)', or exclude such workloads with a range or a "
                    "'where' contract"
                )
            ],
        )
    return error(
        Code.NON_INTEGER,
        said,
        ob.node.span,
        hints=[
            (
                "round it with '//', floor() or ceil(), or exclude such workloads with a "
                "'where' contract"
            )
        ],
    )


def unproven(ob: Obligation) -> Diagnostic:
    """Neither proved nor refuted: the warning and what would let the prover settle it."""
    if ob.kind == DIVISOR:
        assert isinstance(ob.node, ast.Binary)
        divisor = quoted(ob.node.right, "DIVISOR")
        subject = "the divisor" if divisor == "DIVISOR" else f"'{divisor}'"
        return warning(
            Code.UNPROVEN,
            f"cannot prove that {subject} is never zero in {ob.what}",
            ob.node.right.span,
            hints=[
                (
                    f"guard it with 'if {divisor} != 0 then ... else ...', or keep it away "
                    f"from zero with a range or a 'where' contract"
                )
            ],
        )
    if ob.kind == NONNEG:
        return warning(
            Code.UNPROVEN,
            f"cannot prove that {ob.what} is >= 0",
            ob.node.span,
            hints=[
                (
                    "give its params a range or a 'where' contract that keeps it >= 0, or "
                    "write 'max(0, ...)'"
                )
            ],
        )
    return warning(
        Code.UNPROVEN,
        f"cannot prove that {ob.what} is an integer",
        ob.node.span,
        hints=[
            ("round it with '//', floor() or ceil(), or add a 'where' contract that makes it whole")
        ],
    )


def quoted(expr: ast.Expr, otherwise: str) -> str:
    """An expression as source text when short enough to quote in a message."""
    text = format_expr(expr)
    return text if len(text) <= MAX_QUOTED else otherwise
