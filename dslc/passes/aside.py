"""Errors set aside only the member they lie in, so that the rest of a pipeline is still checked
and proved: a stage field (an error in a stage's header: the stage), a let with every let, field
and call that reads it (their one cause is said once), a call argument; a member declared twice
sets aside its first declaration (the second is already dropped). An error anywhere else (a
param, a contract, a probe line) leaves nothing to set aside: everything may depend on it."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from dslc import ast
from dslc.codes import Code
from dslc.diagnostics import Diagnostic
from dslc.model import ResolvedPipeline
from dslc.source import Span

__all__ = ["Broken", "broken_members", "set_aside"]


def _inside(inner: Span, outer: Span) -> bool:
    return inner.source.name == outer.source.name and (
        (outer.line, outer.column) <= (inner.line, inner.column)
        and (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column)
    )


@attrs.frozen
class Broken:
    """The members errors lie in, each set aside on its own: stage fields (None: the stage's
    header, so the whole stage), lets and call arguments."""

    fields: frozenset[tuple[str, str | None]] = frozenset()  # (stage, field or None)
    lets: frozenset[str] = frozenset()
    calls: frozenset[str] = frozenset()


def broken_members(pipeline: ResolvedPipeline, problems: Sequence[Diagnostic]) -> Broken | None:
    """Where the errors lie; None when one lies outside every stage, let and call (a param, a
    contract, a probe: everything may depend on it)."""
    fields: set[tuple[str, str | None]] = set()
    lets: set[str] = set()
    calls: set[str] = set()
    for problem in problems:
        if not problem.is_error:
            continue
        span = problem.span
        if problem.code == Code.DUPLICATE and problem.notes and problem.notes[0].span:
            # the second declaration was dropped; the first is set aside too (which one was
            # meant is unknown), and the rest is still checked
            span = problem.notes[0].span
        if span is None:
            return None
        owner = _stage_owner(pipeline, span)
        if owner is not None:
            fields.add(owner)
        elif let := next((x for x in pipeline.lets if _within(span, x.span)), None):
            lets.add(let.name)
        elif call := next((c for c in pipeline.calls if _within(span, c.span)), None):
            calls.add(call.arg)
        else:
            return None
    return Broken(frozenset(fields), frozenset(lets), frozenset(calls))


def _within(inner: Span, outer: Span | None) -> bool:
    return outer is not None and _inside(inner, outer)


def _stage_owner(pipeline: ResolvedPipeline, span: Span) -> tuple[str, str | None] | None:
    """The stage and field (None: the stage's header) a place lies in."""
    for stage in pipeline.stages:
        for field in stage.fields.values():
            if _within(span, field.span):
                return stage.name, field.name
        if _within(span, stage.decl.span):
            return stage.name, None
    return None


def set_aside(pipeline: ResolvedPipeline, broken: Broken) -> ResolvedPipeline:
    """The pipeline without its broken members and without whatever reads a broken let (its
    error is the let's): what is left is checked and proved on its own."""
    if not (broken.fields or broken.lets or broken.calls):
        return pipeline
    dropped: set[str] = set()
    for let in pipeline.lets:  # dependency order: a let's inputs are decided before it
        if let.name in broken.lets or _reads(let.value, dropped):
            dropped.add(let.name)
    stages = []
    for stage in pipeline.stages:
        if (stage.name, None) in broken.fields:
            continue
        kept = {
            name: field
            for name, field in stage.fields.items()
            if (stage.name, name) not in broken.fields and not _reads(field.value, dropped)
        }
        stages.append(attrs.evolve(stage, fields=kept))
    return attrs.evolve(
        pipeline,
        lets=tuple(let for let in pipeline.lets if let.name not in dropped),
        stages=tuple(stages),
        calls=tuple(
            call
            for call in pipeline.calls
            if call.arg not in broken.calls and not _reads(call.value, dropped)
        ),
    )


def _reads(expr: ast.Expr, names: set[str]) -> bool:
    return bool(names) and any(node.id in names for node in ast.names(expr))
