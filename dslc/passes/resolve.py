"""Name resolution: duplicates, `extends` flattening, undefined names and let cycles."""

from __future__ import annotations

from collections.abc import Sequence

from dslc import ast
from dslc.codes import Code
from dslc.diagnostics import Diagnostic, Note, did_you_mean, error
from dslc.limits import MAX_MEMBERS, MAX_PIPELINES, MAX_STAGES
from dslc.model import ResolvedParam, ResolvedPipeline, ResolvedStage
from dslc.passes.members import Members

_FIELD_OPS = {"iterations": "=", "memory": "~", "time": "~"}


Declared = ast.Param | ast.Let | ast.Stage | ast.Field | ast.Pipeline | ast.CallArg


def _duplicate(kind: str, name: str, first: Declared, again: Declared) -> Diagnostic:
    return error(
        Code.DUPLICATE,
        f"{kind} '{name}' is declared twice",
        again.name_span or again.span,
        notes=[Note("first declared here", first.name_span or first.span)],
    )


def check_pipeline_names(
    modules: Sequence[ast.Module],
) -> tuple[dict[str, ast.Pipeline], list[Diagnostic]]:
    """Pipeline names are unique across the whole compilation."""
    found: dict[str, ast.Pipeline] = {}
    problems = []
    count = 0
    for module in modules:
        for pipeline in module.pipelines:
            count += 1
            if pipeline.name in found:
                problems.append(
                    _duplicate("pipeline", pipeline.name, found[pipeline.name], pipeline)
                )
            else:
                found[pipeline.name] = pipeline
    if count > MAX_PIPELINES:
        problems.append(
            error(Code.LIMIT, f"{count:,} pipelines; the limit is {MAX_PIPELINES:,}", None)
        )
    return found, problems


def _own_members(pipeline: ast.Pipeline) -> tuple[list[ast.Member], list[Diagnostic]]:
    """A pipeline's own members, each name once per scope (params and lets share one)."""
    problems: list[Diagnostic] = []
    values: dict[str, ast.Param | ast.Let] = {}
    stages: dict[str, ast.Stage] = {}
    calls: dict[str, ast.CallArg] = {}
    kept: list[ast.Member] = []
    if len(pipeline.members) > MAX_MEMBERS:
        problems.append(
            error(
                Code.LIMIT,
                f"pipeline '{pipeline.name}' has {len(pipeline.members):,} members; "
                f"the limit is {MAX_MEMBERS}",
                pipeline.name_span,
            )
        )
    for member in pipeline.members:
        if isinstance(member, ast.Probe):
            kept.append(member)  # checked once flattened (dslc.passes.facts)
            continue
        if isinstance(member, ast.CallArg):
            if member.arg in calls:
                problems.append(_duplicate("call", member.arg, calls[member.arg], member))
                continue
            calls[member.arg] = member
        elif isinstance(member, ast.Stage):
            if member.name in stages:
                problems.append(_duplicate("stage", member.name, stages[member.name], member))
                continue
            stages[member.name] = member
            fields: dict[str, ast.Field] = {}
            for field in member.fields:
                if field.name in fields:
                    problems.append(_duplicate("field", field.name, fields[field.name], field))
                fields[field.name] = field
        else:
            if member.name in values:
                kind = "param" if isinstance(values[member.name], ast.Param) else "let"
                kind = kind if type(values[member.name]) is type(member) else "name"
                problems.append(_duplicate(kind, member.name, values[member.name], member))
                continue
            values[member.name] = member
        kept.append(member)
    if len(stages) > MAX_STAGES:
        problems.append(
            error(
                Code.LIMIT,
                f"pipeline '{pipeline.name}' has {len(stages)} stages; the limit is {MAX_STAGES}",
                pipeline.name_span,
            )
        )
    return kept, problems


def _check_field(field: ast.Field) -> list[Diagnostic]:
    expected = _FIELD_OPS.get(field.name)
    if expected is None:
        return [
            error(
                Code.SYNTAX,
                f"unknown stage field '{field.name}'; a stage has iterations, memory and time",
                field.name_span,
                hints=did_you_mean(field.name, _FIELD_OPS),
            )
        ]
    if field.op != expected:
        example = "iterations = steps" if expected == "=" else f"{field.name} ~ tokens"
        return [
            error(
                Code.SYNTAX,
                f"'{field.name}' takes '{expected}', not '{field.op}'",
                field.name_span,
                hints=[
                    f"write '{example}'"
                    + (
                        ""
                        if expected == "="
                        else ": a measure says what the quantity is proportional to"
                    )
                ],
            )
        ]
    return []


def _parent_chain(
    name: str, by_name: dict[str, ast.Pipeline]
) -> tuple[list[ast.Pipeline], Diagnostic | None]:
    """The pipeline and its ancestors, root first; a cycle or unknown parent is a diagnostic."""
    chain: list[ast.Pipeline] = []
    seen: set[str] = set()
    current: str | None = name
    while current is not None:
        node = by_name[current]
        if current in seen:
            cycle = " -> ".join([p.name for p in chain] + [current])
            return [], error(
                Code.CYCLE, f"'extends' refers back to itself: {cycle}", node.parent_span
            )
        seen.add(current)
        chain.append(node)
        parent = node.parent
        if parent is not None and parent not in by_name:
            return [], error(
                Code.UNDEFINED_NAME,
                f"unknown parent pipeline '{parent}'",
                node.parent_span,
                hints=did_you_mean(parent, set(by_name) - seen),
            )
        current = parent
    return list(reversed(chain)), None


def flatten(
    name: str, by_name: dict[str, ast.Pipeline]
) -> tuple[ResolvedPipeline | None, list[Diagnostic]]:
    """Apply `extends`: overrides replace by name, stage overrides merge field-wise in place.

    A child's `call ARG` replaces the parent's in its place; a child's `probe` lines replace all of
    the parent's; a stage override whose header has `uses` or `per step` replaces both facts.
    """
    chain, problem = _parent_chain(name, by_name)
    if problem is not None:
        return None, [problem]
    problems: list[Diagnostic] = []
    params: dict[str, ResolvedParam] = {}
    lets: dict[str, ast.Let] = {}
    stages: dict[str, ResolvedStage] = {}
    calls: dict[str, ast.CallArg] = {}
    probes: tuple[ast.Probe, ...] = ()
    for index, pipeline in enumerate(chain):
        own, member_problems = _own_members(pipeline)
        last = index == len(chain) - 1  # the pipeline itself, after its parents
        if pipeline.name == name:
            problems += member_problems
        probes = tuple(m for m in own if isinstance(m, ast.Probe)) or probes
        for member in own:
            if isinstance(member, ast.Probe):
                continue
            if isinstance(member, ast.CallArg):
                calls[member.arg] = member
            elif isinstance(member, ast.Param):
                problems += _merge_param(member, params, lets, last)
            elif isinstance(member, ast.Let):
                if member.name in params:
                    problems.append(
                        _duplicate("name", member.name, params[member.name].decl, member)
                    )
                    continue
                lets[member.name] = member
            else:
                problems += _merge_stage(member, stages, last)
    resolved = ResolvedPipeline(
        name,
        chain[-1].parent,
        chain[-1],
        tuple(params.values()),
        tuple(lets.values()),
        tuple(stages.values()),
        calls=tuple(calls.values()),
        probes=probes,
    )
    return resolved, problems


def _merge_param(
    member: ast.Param, params: dict[str, ResolvedParam], lets: dict[str, ast.Let], last: bool
) -> list[Diagnostic]:
    """A param over those inherited: `param NAME = VALUE` changes only the default of a parent's
    param; a full declaration replaces a param (or an inherited let) of that name."""
    if member.type is None:
        inherited = params.get(member.name)
        if inherited is None:
            return [
                error(
                    Code.UNDEFINED_NAME,
                    f"'param {member.name} = ...' overrides a default, but no parent "
                    f"declares '{member.name}'",
                    member.name_span,
                    hints=[
                        *did_you_mean(member.name, params),
                        f"declare it in full: 'param {member.name}: int = ...'",
                    ][:1],
                )
            ]
        params[member.name] = ResolvedParam(member.name, inherited.type, inherited.decl, member)
        return []
    problems = []
    if member.name in lets and last:
        problems.append(_duplicate("name", member.name, lets[member.name], member))
    lets.pop(member.name, None)
    params[member.name] = ResolvedParam(member.name, member.type, member, member)
    return problems


def _merge_stage(
    member: ast.Stage, stages: dict[str, ResolvedStage], last: bool
) -> list[Diagnostic]:
    """A stage over the inherited one of its name: its fields replace theirs one by one, its header
    facts (`uses`, `per step`) all of theirs when it states any; the pipeline's own fields are
    checked."""
    problems: list[Diagnostic] = []
    if last:
        for field in member.fields:
            problems += _check_field(field)
    before = stages.get(member.name)
    merged = dict(before.fields) if before is not None else {}
    merged.update({f.name: f for f in member.fields if f.name in _FIELD_OPS})
    header = member
    if before is not None and not member.has_header_facts:
        header = before.header or before.decl
    stages[member.name] = ResolvedStage(member.name, member, merged, header)
    return problems


def _expressions(pipeline: ResolvedPipeline) -> list[tuple[ast.Expr, str | None]]:
    """Every expression that may name things, with the let it defines (None: not a let)."""
    exprs: list[tuple[ast.Expr, str | None]] = []
    for param in pipeline.params:
        exprs += [(e, None) for e in (param.where,) if e is not None]
    exprs += [(let.value, let.name) for let in pipeline.lets]
    for stage in pipeline.stages:
        exprs += [(field.value, None) for field in stage.fields.values()]
    exprs += [(call.value, None) for call in pipeline.calls]
    return exprs


def check_names(
    pipeline: ResolvedPipeline, *, own_only: bool = True, members: Members | None = None
) -> list[Diagnostic]:
    """Every name is a param or a let, every call a known function (`members`: what the
    compilation found of each expression already; one whose names are all known is not walked)."""
    known = {p.name for p in pipeline.params} | {let.name for let in pipeline.lets}
    problems = []
    for expr, defining in _expressions(pipeline):
        if members is not None:
            names, unknown_call = members.names(expr)
            if not unknown_call and names <= known:
                continue
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id not in known:
                kind = "function" if node.id in ast.FUNCTIONS else "name"
                hint = (
                    (f"'{node.id}' is a function: call it, e.g. '{node.id}(x)'",)
                    if kind == "function"
                    else did_you_mean(node.id, known - {defining})  # never the let being defined
                )
                problems.append(
                    error(Code.UNDEFINED_NAME, f"unknown {kind} '{node.id}'", node.span, hints=hint)
                )
            elif isinstance(node, ast.Call) and node.func not in ast.FUNCTIONS:
                problems.append(
                    error(
                        Code.UNDEFINED_NAME,
                        f"unknown function '{node.func}'",
                        node.func_span,
                        hints=did_you_mean(node.func, ast.FUNCTIONS)
                        or (f"functions: {', '.join(ast.FUNCTIONS)}",),
                    )
                )
    # Range bounds and defaults are constant: they may not name anything.
    for param in pipeline.params:
        for bound in (param.decl.lo, param.decl.hi, param.default_decl.default):
            for node in ast.walk(bound) if bound is not None else ():
                if isinstance(node, ast.Name):
                    problems.append(
                        error(
                            Code.TYPE,
                            f"'{node.id}' is not a constant; defaults and ranges "
                            "must be constant expressions",
                            node.span,
                        )
                    )
    return problems


def order_lets(pipeline: ResolvedPipeline) -> tuple[tuple[ast.Let, ...], list[Diagnostic]]:
    """Lets in dependency order (Kahn's algorithm, stable); a cycle is a diagnostic naming it."""
    by_name = {let.name: let for let in pipeline.lets}
    deps = {
        let.name: [n.id for n in ast.names(let.value) if n.id in by_name] for let in pipeline.lets
    }
    ordered: list[ast.Let] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done
    problems: list[Diagnostic] = []
    for root in by_name:
        if state.get(root):
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = []
        while stack:
            name, index = stack.pop()
            if index == 0:
                state[name] = 1
                path.append(name)
            if index < len(deps[name]):
                stack.append((name, index + 1))
                dep = deps[name][index]
                if state.get(dep) == 1:
                    cycle = path[path.index(dep) :] + [dep]
                    let = by_name[dep]
                    problems.append(
                        error(
                            Code.CYCLE,
                            "lets refer back to themselves: " + " -> ".join(cycle),
                            let.name_span,
                            notes=[
                                Note(f"'{n}' is defined here", by_name[n].name_span)
                                for n in cycle[1:-1]
                            ],
                        )
                    )
                    return tuple(pipeline.lets), problems
                if not state.get(dep):
                    stack.append((dep, 0))
            else:
                state[name] = 2
                path.pop()
                ordered.append(by_name[name])
    return tuple(ordered), problems
