"""The static cost model at compile time: what the loader would refuse is a `limit` diagnostic.

The pipeline is lowered exactly as `dslc build` emits it and validated by the loader's own code
(`runtime.artifact.parse_pipeline`, whose checks apply `runtime.cost` and `runtime.limits` to every
node), so a program that checks always builds and loads: one model, one set of limits. It runs
before anything is evaluated (contracts at the default workload, the prover), so the compiler
never computes a value the model has not bounded.
"""

from __future__ import annotations

import re
from typing import Any

from dslc import emit
from dslc.diagnostics import Diagnostic, error
from dslc.model import ResolvedPipeline
from dslc.source import Span
from runtime.artifact import parse_pipeline
from runtime.checks import NodeBudget, into
from runtime.errors import ArtifactError, ArtifactLimitError

__all__ = ["CostBudget", "check_cost"]

_SEGMENT = re.compile(r"\.?([A-Za-z_]+)|\[(\d+)\]")


class _AnySource(dict[str, int]):
    """Every source is number 0: spans only need to validate here, not to be exact."""

    def __missing__(self, key: str) -> int:
        return 0


class CostBudget:
    """The artifact-wide budgets (nodes, load work) shared by every pipeline of one compilation."""

    def __init__(self) -> None:
        self.nodes = NodeBudget()
        self.index = 0  # the next pipeline's position in the artifact
        self.exhausted = False  # a limit of the whole artifact was hit: later pipelines are moot


def check_cost(pipeline: ResolvedPipeline, budget: CostBudget) -> list[Diagnostic]:
    """Validate the pipeline as the loader would; a refusal becomes a diagnostic at its source."""
    spans: emit.SpanTable = {}
    document = emit.pipeline_document(pipeline, _AnySource(), spans)
    index = budget.index
    budget.index += 1
    try:
        parse_pipeline(
            document, into(into(None, "pipelines"), f"[{index}]"), index, 1, budget.nodes
        )
    except ArtifactLimitError as exc:
        budget.exhausted = budget.nodes.left < 0 or budget.nodes.work_left < 0
        span = _locate(document, exc.path, spans) or pipeline.decl.name_span
        return [error("limit", exc.problem, span, hints=_hints(exc.problem))]
    except ArtifactError as exc:  # the compiler emitted something its own loader refuses: a bug
        span = _locate(document, exc.path, spans) or pipeline.decl.name_span
        return [error("type", f"internal: the compiled form is invalid: {exc.problem}", span)]
    return []


def _hints(problem: str) -> list[str]:
    if "bits" in problem:
        return ["give the params a finite range ('in [LO, HI]'), or lower the powers"]
    if "word operations" in problem:
        return ["narrow the params' ranges, or split the work across fewer, smaller formulas"]
    return []


def _locate(document: dict[str, Any], path: str, spans: emit.SpanTable) -> Span | None:
    """The span of the deepest emitted object on `path` (`pipelines[0].lets[3].expr.args[0]`)."""
    segments = [name or int(number) for name, number in _SEGMENT.findall(path)][2:]
    node: Any = document
    found = spans.get(id(node))
    for segment in segments:
        if segment == "name" and isinstance(node, dict):
            return spans.get((id(node), "name")) or found
        try:
            node = node[segment]
        except (KeyError, IndexError, TypeError):
            break
        found = spans.get(id(node)) or found
    return found
