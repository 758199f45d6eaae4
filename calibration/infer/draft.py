"""The draft `.wf` file: the skeleton with the proposed lets, probe minimums and stages, each
proposal preceded by a comment with its evidence; formatted by `dslc fmt`'s formatter.

Every proposed expression is a `dslc.ast` node printed by the compiler's formatter
(``dslc.fmt.format_expr``). A probe minimum joins the skeleton's own `probe` group of its param
(`probe frames >= 5, height, width`: an axis may be in one group only), else gets a line of its
own; the skeleton's other lines are kept as written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from artifact.point import Point
from calibration.infer.analyse import StageProposal
from calibration.infer.layout import stage_text
from calibration.infer.measure import with_stages
from calibration.infer.search import MAX_TERMS, TermFit
from calibration.infer.terms import Monomial, terms_expr, text_of
from calibration.infer.time_terms import BYTES_WEIGHT, WORK_APPROXIMATE, TimeChoice
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


def field_text(field: str, op: str, value: ast.Expr) -> str:
    """`memory ~ [a, b]`, `iterations = steps + 1`: a field as the formatter writes it."""
    return f"{field} {op} {text_of(value)}"


def _measure_line(field: str, terms: Sequence[Monomial]) -> str:
    return field_text(field, "~", terms_expr([m.expr for m in terms]))


def _sets(n: int) -> str:
    return f"{n} set" if n == 1 else f"{n} sets"


def _fit_comment(what: str, fit: TermFit, sizes: int, unit: str) -> str:
    rejected = "; rejected: " + "; ".join(fit.rejected[:2]) if fit.rejected else ""
    residual = f"{round(fit.residual)} B" if unit == "B" else f"{fit.residual * 1e3:.2g} ms"
    return (
        f"# {what}: fits {sizes} sizes, largest residual {residual}, "
        f"{_sets(fit.tried)} tried{rejected}"
    )


def stage_body(p: StageProposal) -> list[str]:
    """The stage's fields, each after its evidence."""
    lines: list[str] = []
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
        lines.append(field_text("iterations", "=", p.iterations.expr))
    if p.memory.terms is None:
        lines.append("# memory: no term set of the grammar explains every size exactly")
    elif p.memory.terms:
        kept = len(p.memory_samples) - len({tuple(x.items()) for r in p.regimes for x in r.dropped})
        what = (
            "memory (APPROXIMATE: no exact set; within 2 % of every size)"
            if p.approximate
            else "memory"
        )
        # the evidence at the base's values; a switch's line says how its factors fit
        lines.append(_fit_comment(what, p.base_memory or p.memory, kept, "B"))
        lines.append(_measure_line("memory", p.memory.terms))
    else:
        lines.append(f"# memory: constant over {len(p.memory_samples)} sizes (the default ~ 1)")
    lines.extend(time_lines(p.time))
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


def time_lines(t: TimeChoice) -> list[str]:
    """`time ~` after its evidence: the counted work's fit, the same in every run (the measured
    times' check is the JSON report's and the command's message: it moves with the machine)."""
    shown = "; rejected: " + "; ".join(t.work.rejected[:2]) if t.work.rejected else ""
    counted = f"the counted work (FLOPs + {BYTES_WEIGHT} x bytes, op by op)"
    if t.source == "memory":
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
            if t.source == "work"
            else f"within {WORK_APPROXIMATE:.0%} (APPROXIMATE: no set exactly)"
        )
        head = (
            f"# time per iteration: the smallest set that gives {counted} {how} at "
            f"{t.work_sizes} sizes, {_sets(t.work.tried)} tried{shown}; the measured times: the "
            "JSON report"
        )
    return [head, _measure_line("time", t.terms)] if t.terms else [head]


def _lets(proposals: Sequence[StageProposal]) -> list[str]:
    seen: dict[str, ast.Expr] = {}
    for p in proposals:
        named = [f for m in [*(p.memory.terms or ()), *p.time.terms] for f in m.features]
        for f in [*([p.iterations.let] if p.iterations.let is not None else []), *named]:
            if f.let is not None:
                seen[f.let] = f.expr
    return [
        f"    let {name} = {text_of(expr)}  # proposed: the floor division that fits"
        for name, expr in seen.items()
    ]


def _minimums(proposals: Sequence[StageProposal]) -> dict[str, tuple[int, str]]:
    """Each param's probe minimum (the largest any stage asks for) and why."""
    best: dict[str, tuple[int, str]] = {}
    for p in proposals:
        for r in p.regimes:
            if r.param not in best or r.minimum > best[r.param][0]:
                best[r.param] = (r.minimum, f"{p.plan.name} off the fit at {_points(r.dropped, 2)}")
    return best


def probe_text(probe: ast.Probe) -> str:
    """`probe frames >= 5, height, width`."""
    return "probe " + ", ".join(
        n if probe.minimum(i) is None else f"{n} >= {probe.minimum(i)}"
        for i, n in enumerate(probe.names)
    )


def _larger(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _offset(lines: Sequence[str], line: int, column: int) -> int:
    return sum(len(text) + 1 for text in lines[: line - 1]) + column - 1


def merge_probes(skeleton: str, minimums: Mapping[str, int]) -> tuple[str, dict[str, int]]:
    """The skeleton with each minimum joined to its param's `probe` group (the larger of its own
    and the new one), and the minimums of params in no group (each a line of its own)."""
    from dslc.parse import parse_text

    module = parse_text(skeleton, "<skeleton>")
    left = dict(minimums)
    edits: list[tuple[int, int, str]] = []
    lines = skeleton.split("\n")
    for member in (m for p in module.pipelines for m in p.members):
        if not isinstance(member, ast.Probe) or member.span is None:
            continue
        if not any(n in left for n in member.names):
            continue
        merged = [(member.minimum(i), left.pop(n, None)) for i, n in enumerate(member.names)]
        new = ast.Probe(member.names, minimums=tuple(_larger(a, b) for a, b in merged))
        span = member.span
        start = _offset(lines, span.line, span.column)
        end = _offset(lines, span.end_line, span.end_column)
        edits.append((start, end, probe_text(new)))
    for start, end, text in sorted(edits, reverse=True):
        skeleton = skeleton[:start] + text + skeleton[end:]
    return skeleton, left


def draft_text(skeleton: str, proposals: Sequence[StageProposal], header: str) -> str:
    """The draft, formatted; the skeleton's own lines are kept as written, but for the probe
    groups that take a minimum."""
    wanted = _minimums(proposals)
    merged, alone = merge_probes(skeleton, {k: n for k, (n, _) in wanted.items()})
    blocks = [f"    # probe {k} >= {n}: {wanted[k][1]}" for k, (n, _) in wanted.items()]
    blocks += [f"    {probe_text(ast.Probe((k,), minimums=(n,)))}" for k, n in alone.items()]
    blocks += _lets(proposals)
    if blocks:
        blocks.append("")
    for p in proposals:
        blocks.append(stage_text(p.plan, stage_body(p)))
    text = header + with_stages(merged, "\n".join(blocks))
    return formatted(text)


def formatted(text: str) -> str:
    from dslc.fmt import format_source
    from dslc.source import SourceFile

    return format_source(SourceFile("<draft>", text))
