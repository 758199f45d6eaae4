"""The static cost model at compile time: what the loader would refuse is a `limit` diagnostic.

The pipeline's IR, as the emit pass made it (exactly what `dslc build` writes), is validated by the
loader's own code (`artifact.document.parse_pipeline`, whose checks apply `artifact.cost` and
`artifact.limits` to every node), so a program that checks always builds and loads: one model, one
set of limits. The pass reads the IR; it emits nothing. It runs before anything is evaluated
(contracts at the default workload, the prover), so the compiler never computes a value the model
has not bounded.
"""

from __future__ import annotations

from artifact.document import parse_pipeline
from artifact.errors import ArtifactError, ArtifactLimitError
from artifact.json_checks import as_name, into
from artifact.tree_checks import CheckedTrees, NodeBudget
from artifact.write import JsonObject, JsonValue
from dslc.codes import Code
from dslc.diagnostics import Diagnostic, error
from dslc.emit import IrCache, SpanTable
from dslc.model import ResolvedPipeline
from dslc.source import Span

__all__ = ["CostBudget", "check_cost"]


class CostBudget:
    """The artifact-wide budgets (nodes, load work) shared by every pipeline of one compilation,
    what each pipeline that passed charged them, by what its cost depends on (`_cost_key`), and
    what the loader's checks made of each IR object (`checked`: shared objects are checked once)."""

    def __init__(self) -> None:
        self.checked = CheckedTrees()
        self.nodes = NodeBudget()
        self.index = 0  # the next pipeline's position in the artifact
        self.exhausted = False  # a limit of the whole artifact was hit: later pipelines are moot
        self.charged: dict[tuple[object, ...], tuple[int, int]] = {}  # key -> (nodes, work)
        self._alive: list[ResolvedPipeline] = []  # keeps the nodes whose ids are in the keys


def check_cost(
    pipeline: ResolvedPipeline, document: JsonObject, ir: IrCache, budget: CostBudget
) -> list[Diagnostic]:
    """Validate the pipeline's IR `document` (emitted into `ir`) as the loader would; a refusal
    becomes a diagnostic at its source.

    A pipeline whose formulas, params' ranges and lets are those of one already validated (a child
    that only changes defaults, or adds nothing) is charged the same nodes and work without being
    checked again: the loader would find the same, node for node.
    """
    index = budget.index
    budget.index += 1
    key = _cost_key(pipeline)
    nodes = budget.nodes
    if key in budget.charged and _valid_names(pipeline):
        count, work = budget.charged[key]
        if count <= nodes.left and work <= nodes.work_left:
            nodes.left -= count
            nodes.work_left -= work
            return []
    spans = ir.spans
    left, work_left = nodes.left, nodes.work_left
    n_sources = max(ir.index.values(), default=0) + 1
    try:
        here = into(into(None, "pipelines"), f"[{index}]")
        parse_pipeline(document, here, index, n_sources, nodes, budget.checked)
    except ArtifactLimitError as exc:
        budget.exhausted = budget.nodes.left < 0 or budget.nodes.work_left < 0
        span = _locate(document, exc.location, spans) or pipeline.decl.name_span
        return [error(Code.LIMIT, exc.problem, span, hints=_hints(exc.limit))]
    except ArtifactError as exc:  # the compiler emitted something its own loader refuses: a bug
        span = _locate(document, exc.location, spans) or pipeline.decl.name_span
        return [error(Code.TYPE, f"internal: the compiled form is invalid: {exc.problem}", span)]
    budget.charged[key] = (left - nodes.left, work_left - nodes.work_left)
    budget._alive.append(pipeline)
    return []


def _cost_key(pipeline: ResolvedPipeline) -> tuple[object, ...]:
    """What the loader's checks of a pipeline depend on besides its name and defaults: params'
    types and ranges, and every formula by identity (an inherited one is the parent's own node)."""
    params = tuple((p.name, p.type, p.lo, p.hi, id(p.where)) for p in pipeline.params)
    lets = tuple((let.name, id(let.value), pipeline.types.get(let.name)) for let in pipeline.lets)
    stages = tuple(
        (
            stage.name,
            tuple((name, id(field.value)) for name, field in stage.fields.items()),
            tuple((use.component, use.entry) for use in stage.uses),
            stage.per_step,
        )
        for stage in pipeline.stages
    )
    calls = tuple((call.arg, id(call.value)) for call in pipeline.calls)
    return params, lets, stages, calls, tuple(probe.names for probe in pipeline.probes)


def _valid_names(pipeline: ResolvedPipeline) -> bool:
    """Whether the loader would accept the pipeline's own name and its parent's."""
    try:
        for name in (pipeline.name, pipeline.parent):
            if name is not None:
                as_name(name, None)
    except ArtifactError:
        return False
    return True


def _hints(limit: str) -> list[str]:
    """What to change in the source when the loader would refuse the pipeline over `limit`."""
    if limit == "MAX_VALUE_BITS":
        return ["give the params a finite range ('in [LO, HI]'), or lower the powers"]
    if limit in ("MAX_CALL_WORK", "MAX_LOAD_WORK"):
        return ["narrow the params' ranges, or split the work across fewer, smaller formulas"]
    return []


def _locate(document: JsonObject, location: tuple[str | int, ...], spans: SpanTable) -> Span | None:
    """The span of the deepest emitted object on the error's `location` (`("pipelines", 0,
    "lets", 3, "expr", "args", 0)`: the pipeline's own steps start at the third)."""
    node: JsonValue = document
    found = spans.get(id(node))
    for segment in location[2:]:
        if segment == "name" and isinstance(node, dict):
            return spans.get((id(node), "name")) or found
        node, exists = _child(node, segment)
        if not exists:
            break
        found = spans.get(id(node)) or found
    return found


def _child(node: JsonValue, segment: str | int) -> tuple[JsonValue, bool]:
    """`node[segment]`, and whether there is one."""
    if isinstance(node, dict) and isinstance(segment, str):
        return node.get(segment), segment in node
    if isinstance(node, list) and isinstance(segment, int) and -len(node) <= segment < len(node):
        return node[segment], True
    return None, False
