"""Pipeline facts after inheritance: stage `uses` and `per step`, `probe` axes and `call` count.

What the calibration library reads from a pipeline must be unambiguous: a (component, method) opens
one stage, one stage counts the steps, and a probe axis is an int param lightened in one group.
"""

from __future__ import annotations

from dslc import ast
from dslc.codes import Code
from dslc.diagnostics import Diagnostic, Note, did_you_mean, error
from dslc.limits import MAX_CALLS, MAX_PROBE_GROUP, MAX_STAGE_USES
from dslc.model import ResolvedPipeline
from dslc.source import Span


def check_facts(pipeline: ResolvedPipeline) -> list[Diagnostic]:
    """Every fact check of one flattened pipeline."""
    return _uses(pipeline) + _per_step(pipeline) + _probes(pipeline) + _calls(pipeline)


def _uses(pipeline: ResolvedPipeline) -> list[Diagnostic]:
    """A (component, method) is listed once per stage and opens at most one stage."""
    problems = []
    opened: dict[tuple[str, str], tuple[str, ast.Use]] = {}
    for stage in pipeline.stages:
        if len(stage.uses) > MAX_STAGE_USES:
            problems.append(
                error(
                    Code.LIMIT,
                    f"stage '{stage.name}' uses {len(stage.uses)} components; the limit is "
                    f"{MAX_STAGE_USES}",
                    stage.uses[MAX_STAGE_USES].span,
                )
            )
        listed: dict[tuple[str, str], ast.Use] = {}
        for use in stage.uses:
            key = (use.component, use.entry)
            if key in listed:
                problems.append(
                    error(
                        Code.DUPLICATE,
                        f"'{use.text}' is listed twice in stage '{stage.name}'",
                        use.span,
                        notes=[Note("first listed here", listed[key].span)],
                    )
                )
                continue
            listed[key] = use
            if key in opened:
                other, first = opened[key]
                problems.append(
                    error(
                        Code.DUPLICATE,
                        f"'{use.text}' opens both stage '{other}' and stage '{stage.name}'",
                        use.span,
                        notes=[Note(f"stage '{other}' uses it here", first.span)],
                        hints=[
                            "a component call opens one stage; "
                            + "name another method (vae.encode, vae.decode)"
                        ],
                    )
                )
                continue
            opened[key] = (stage.name, use)
    return problems


def _per_step(pipeline: ResolvedPipeline) -> list[Diagnostic]:
    """At most one stage counts its iterations with the step callback."""
    stepped = [stage for stage in pipeline.stages if stage.per_step]
    return [
        error(
            Code.DUPLICATE,
            f"stages '{stepped[0].name}' and '{stage.name}' are both 'per step'; one stage of a "
            "pipeline counts the denoising steps",
            stage.per_step_span,
            notes=[Note(f"stage '{stepped[0].name}' is 'per step' here", stepped[0].per_step_span)],
        )
        for stage in stepped[1:]
    ]


def _probes(pipeline: ResolvedPipeline) -> list[Diagnostic]:
    """Probe axes are int params, each in one group, at most ``MAX_PROBE_GROUP`` to a group
    (calibration weighs every corner of a group's box: check-ok implies calibrate can plan it)."""
    problems = []
    params = {p.name: p for p in pipeline.params}
    int_params = [p.name for p in pipeline.params if p.type == "int"]
    seen: dict[str, Span | None] = {}
    for probe in pipeline.probes:
        spans = probe.name_spans or (probe.span,) * len(probe.names)
        if len(probe.names) > MAX_PROBE_GROUP:
            problems.append(
                error(
                    Code.LIMIT,
                    f"probe group of {len(probe.names)} params; the limit is {MAX_PROBE_GROUP}: "
                    f"calibration weighs the 2**{len(probe.names)} corners of its box",
                    spans[MAX_PROBE_GROUP],
                    hints=[f"split it into groups of at most {MAX_PROBE_GROUP} params"],
                )
            )
        for name, span in zip(probe.names, spans):
            param = params.get(name)
            if param is None:
                is_let = pipeline.let(name) is not None
                problems.append(
                    error(
                        Code.UNDEFINED_NAME,
                        f"unknown param '{name}' in 'probe'"
                        + ("; it is a let, and a probe axis is an int param" if is_let else ""),
                        span,
                        hints=() if is_let else did_you_mean(name, int_params),
                    )
                )
                continue
            if param.type == "bool":
                problems.append(
                    error(
                        Code.TYPE,
                        f"probe axis '{name}' is a bool param; a probe axis is an int param",
                        span,
                        hints=["a probe lightens a workload by lowering int params"],
                    )
                )
                continue
            if name in seen:
                problems.append(
                    error(
                        Code.DUPLICATE,
                        f"'{name}' is a probe axis twice",
                        span,
                        notes=[Note("first listed here", seen[name])],
                        hints=["a param belongs to one probe group"],
                    )
                )
                continue
            seen[name] = span
    return problems


def _calls(pipeline: ResolvedPipeline) -> list[Diagnostic]:
    """The loader's bound on `call` arguments, which inheritance could otherwise exceed."""
    if len(pipeline.calls) <= MAX_CALLS:
        return []
    return [
        error(
            Code.LIMIT,
            f"pipeline '{pipeline.name}' has {len(pipeline.calls):,} call arguments; the limit is "
            f"{MAX_CALLS}",
            pipeline.decl.name_span,
        )
    ]
