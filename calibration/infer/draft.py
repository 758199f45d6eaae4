"""The draft `.wf` file: the skeleton with the proposed lets, probe minimums and stages, each
proposal preceded by a comment with its evidence; printed by `dslc fmt`'s formatter.

The draft is a `dslc.ast` tree: the skeleton's, parsed (its comments kept beside it), with the
proposals added as nodes whose comments ride in their ``ast.Trivia``; ``dslc.fmt`` prints it. A
probe minimum joins the skeleton's own `probe` group of its param (`probe frames >= 5, height,
width`: an axis may be in one group only), else gets a line of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from artifact.point import Point
from calibration.infer.analyse import StageProposal
from calibration.infer.layout import StagePlan, stage_node
from calibration.infer.measure import load, printed, skeleton_tree, with_stages
from calibration.infer.search import MAX_TERMS, TermFit
from calibration.infer.shares import share_text, shares
from calibration.infer.terms import Monomial, terms_expr, text_of
from calibration.infer.time_terms import BYTES_WEIGHT, WORK_APPROXIMATE, TimeChoice, TimeSource
from dslc import ast

#: What `iterations` counts, for the draft's comment and docs/cli.md: the loop's steps.
ITERATIONS_COUNT = (
    "the loop's steps: a second guidance call a step shows in the memory and time factors and "
    "the layer uses, not in the count"
)


def _points(points: Sequence[Point], limit: int = 4) -> str:
    shown = [
        ",".join(f"{k}={v}" for k, v in p.items() if not isinstance(v, bool))
        for p in points[:limit]
    ]
    more = f" and {len(points) - limit} more" if len(points) > limit else ""
    return "; ".join(shown) + more


#: The counted work's unit in the comments (FLOPs + ``BYTES_WEIGHT`` x bytes).
WORK_UNIT = "work"

#: A line of a stage's body: a `# ...` comment, or a field.
Line = str | ast.Field


def line_text(line: Line) -> str:
    """`memory ~ [a, b]`, `# memory: ...`: a line as the formatter writes it."""
    return line if isinstance(line, str) else f"{line.name} {line.op} {text_of(line.value)}"


def _measure_line(field: str, terms: Sequence[Monomial]) -> ast.Field:
    return ast.Field(field, "~", terms_expr([m.expr for m in terms]))


def _sets(n: int) -> str:
    return f"{n} set" if n == 1 else f"{n} sets"


def _fit_comment(what: str, fit: TermFit, sizes: str, unit: str) -> str:
    rejected = "; rejected: " + "; ".join(fit.rejected[:2]) if fit.rejected else ""
    return (
        f"# {what}: fits {sizes}, largest residual {residual_text(fit.residual, unit)}, "
        f"{_sets(fit.tried)} tried{rejected}"
    )


def residual_text(residual: float, unit: str) -> str:
    """A largest residual as the comments write it: whole bytes, else the unit's 6 digits."""
    return f"{round(residual)} B" if unit == "B" else f"{residual:.6g} {unit}"


def at_default(what: str, fit: TermFit, default: Point | None, unit: str) -> list[str]:
    """Each term's coefficient and its part of the stage at the default workload (the JSON's
    numbers): a term that carries the stage told from one that barely moves it."""
    parts = shares(fit, default) if default else ()
    if not parts or default is None:
        return []
    return [f"# {what} at the default workload ({_points([default])}): {share_text(parts, unit)}"]


def _memory_sizes(p: StageProposal) -> str:
    """The sizes the memory's fit holds: the base's (in its regimes) and, where a switch's factors
    refitted it, each switch's."""
    kept = len(p.memory_samples) - len({tuple(x.items()) for r in p.regimes for x in r.dropped})
    refitted = p.base_memory is not None and p.memory != p.base_memory
    flipped = sum(s.sizes for s in p.switches if not s.unchanged) if refitted else 0
    more = f" (+ {flipped} with a switch flipped)" if flipped else ""
    return f"{kept} sizes{more}"


def stage_body(p: StageProposal, default: Point | None = None) -> list[Line]:
    """The stage's fields, each after its evidence; ``default`` (the default workload) gives
    each term's part of the stage."""
    lines: list[Line] = []
    counts = sorted({c for _, c in p.counts})
    rejected = [t for t in p.iterations.tried if t.verdict != "chosen"]
    reasons = "; ".join(f"{t.text} ({t.verdict.removeprefix('rejected: ')})" for t in rejected[:2])
    if p.plan.stepped:
        lines.append(f"# iterations count {ITERATIONS_COUNT}")
    if p.iterations.expr is None:
        lines.append(f"# iterations: no formula of the grammar gives the counts {counts}")
    else:
        lines.append(
            f"# iterations: {len(p.counts)} sizes, counts {counts[:8]}"
            + (f"; rejected {reasons}" if reasons else "")
        )
        lines.append(ast.Field("iterations", "=", p.iterations.expr))
    if p.memory.terms is None:
        lines.append("# memory: no term set of the grammar explains every size exactly")
    elif p.memory.terms:
        what = (
            "memory (APPROXIMATE: no exact set; within 2 % of every size)"
            if p.approximate
            else "memory"
        )
        # the fit the `memory ~` line writes (a switch's factors included): the JSON's numbers
        lines.append(_fit_comment(what, p.memory, _memory_sizes(p), "B"))
        lines.extend(at_default("memory", p.memory, default, "B"))
        lines.append(_measure_line("memory", p.memory.terms))
    else:
        lines.append(f"# memory: constant over {len(p.memory_samples)} sizes (the default ~ 1)")
    lines.extend(time_lines(p.time, default))
    lines.extend(switch_lines(p))
    return lines


def switch_lines(p: StageProposal) -> list[str]:
    """What each flipped bool param showed; REVIEW where a quantity stays unexplained (the draft
    then holds the base's value's terms only)."""
    out = []
    for s in p.switches:
        mark = "REVIEW: " if s.review or s.failed else ""
        failed = f", {s.failed} failed (the report has the errors)" if s.failed else ""
        if s.unchanged:
            out.append(
                f"# {mark}{s.at} measured at {s.sizes} sizes{failed} (work counted): the same "
                "memory, work and iterations at every size"
            )
            continue
        out.append(
            f"# {mark}{s.at} measured at {s.sizes} sizes{failed} (work counted): iterations "
            f"{s.iterations}"
            f"; memory: {s.memory}; time: {s.time}"
        )
    return out


def stage_tree(plan: StagePlan, body: Sequence[Line]) -> ast.Stage:
    """The stage of ``body``: each comment above the field after it, the last ones before `}`."""
    fields: list[ast.Field] = []
    above: list[str] = []
    for line in body:
        if isinstance(line, str):
            above.append(line)
            continue
        fields.append(attrs.evolve(line, trivia=ast.Trivia(tuple(above))) if above else line)
        above = []
    return stage_node(plan, fields, ast.Trivia(close=tuple(above)) if above else None)


def time_lines(t: TimeChoice, default: Point | None = None) -> list[Line]:
    """`time ~` after its evidence: the counted work's fit, the same in every run (the measured
    times' check is the JSON report's and the command's message: it moves with the machine)."""
    shown = "; rejected: " + "; ".join(t.work.rejected[:2]) if t.work.rejected else ""
    counted = f"the counted work (FLOPs + {BYTES_WEIGHT} x bytes, op by op)"
    if t.source == TimeSource.MEMORY:
        head = (
            f"# time per iteration: no set of up to {MAX_TERMS} terms gives {counted} within "
            f"{WORK_APPROXIMATE:.0%} at {t.work_sizes} sizes; the memory's terms without steps as "
            "a guess (the default ~ 1 if none): recheck on your device"
        )
    elif not t.terms:
        head = (
            f"# time per iteration: {counted} is the same at {t.work_sizes} sizes (the default ~ 1)"
        )
    else:
        how = (
            "exactly"
            if t.source == TimeSource.WORK
            else f"within {WORK_APPROXIMATE:.0%} (APPROXIMATE: no set exactly)"
        )
        head = (
            f"# time per iteration: the smallest set that gives {counted} {how} at "
            f"{t.work_sizes} sizes, {_sets(t.work.tried)} tried, largest residual "
            f"{residual_text(t.work.residual, WORK_UNIT)}{shown}; the measured times: the JSON "
            "report"
        )
        return [
            head,
            *at_default("work", t.work, default, WORK_UNIT),
            _measure_line("time", t.terms),
        ]
    return [head, _measure_line("time", t.terms)] if t.terms else [head]


def _lets(proposals: Sequence[StageProposal]) -> list[ast.Let]:
    seen: dict[str, ast.Expr] = {}
    for p in proposals:
        named = [f for m in [*(p.memory.terms or ()), *p.time.terms] for f in m.features]
        for f in [*([p.iterations.let] if p.iterations.let is not None else []), *named]:
            if f.let is not None:
                seen[f.let] = f.expr
    why = ast.Trivia(trail="# proposed: the floor division that fits")
    return [ast.Let(name, expr, trivia=why) for name, expr in seen.items()]


def _minimums(proposals: Sequence[StageProposal]) -> dict[str, tuple[int, str]]:
    """Each param's probe minimum (the largest any stage asks for) and why."""
    best: dict[str, tuple[int, str]] = {}
    for p in proposals:
        for r in p.regimes:
            if r.param not in best or r.minimum > best[r.param][0]:
                best[r.param] = (r.minimum, f"{p.plan.name} off the fit at {_points(r.dropped, 2)}")
    return best


def _larger(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def merge_probes(
    pipeline: ast.Pipeline, minimums: Mapping[str, int]
) -> tuple[ast.Pipeline, dict[str, int]]:
    """The pipeline with each minimum joined to its param's `probe` group (the larger of its own
    and the new one), and the minimums of params in no group (each a line of its own)."""
    left = dict(minimums)
    members: list[ast.Member] = []
    for member in pipeline.members:
        if isinstance(member, ast.Probe) and any(n in left for n in member.names):
            merged = [(member.minimum(i), left.pop(n, None)) for i, n in enumerate(member.names)]
            member = attrs.evolve(member, minimums=tuple(_larger(a, b) for a, b in merged))
        members.append(member)
    return attrs.evolve(pipeline, members=tuple(members)), left


def _led(member: ast.Member, lead: Sequence[str]) -> ast.Member:
    """The member with ``lead`` above it."""
    trivia = member.trivia or ast.Trivia()
    return attrs.evolve(member, trivia=attrs.evolve(trivia, lead=(*lead, *trivia.lead)))


def _proposed(
    notes: Sequence[str], declared: Sequence[ast.Member], stages: Sequence[ast.Stage]
) -> list[ast.Member]:
    """The proposed members, after a blank line: the probe minimums' notes, then the declared
    probes and lets, then (after a blank line) the stages."""
    above = ["", *notes]
    out: list[ast.Member] = []
    for member in declared:
        out.append(_led(member, above))
        above = []
    above.append("")
    return [*out, *(_led(s, above) if i == 0 else s for i, s in enumerate(stages))]


def draft_tree(skeleton: str, proposals: Sequence[StageProposal], header: str) -> ast.Module:
    """The draft's tree: the skeleton's, with the probe groups that take a minimum merged and the
    proposals after its members; ``header``'s comment lines head the file."""
    module = skeleton_tree(skeleton)
    *before, last = module.pipelines
    wanted = _minimums(proposals)
    merged, alone = merge_probes(last, {k: n for k, (n, _) in wanted.items()})
    notes = [f"# probe {k} >= {n}: {wanted[k][1]}" for k, (n, _) in wanted.items()]
    declared: list[ast.Member] = [ast.Probe((k,), minimums=(n,)) for k, n in alone.items()]
    declared += _lets(proposals)
    default = load(skeleton, last.name, "<skeleton>").default_workload
    stages = [stage_tree(p.plan, stage_body(p, default)) for p in proposals]
    if header:
        merged = attrs.evolve(merged, trivia=ast.Trivia(tuple(header.splitlines())))
    module = attrs.evolve(module, pipelines=(*before, merged))
    return with_stages(module, _proposed(notes, declared, stages))


def draft_text(skeleton: str, proposals: Sequence[StageProposal], header: str) -> str:
    """The draft as `dslc fmt` writes it."""
    return printed(draft_tree(skeleton, proposals, header))
