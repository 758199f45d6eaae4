"""The draft `.wf` file: the skeleton with the proposed lets, probe minimums and stages, each
proposal preceded by a comment with its evidence; formatted by `dslc fmt`'s formatter."""

from __future__ import annotations

from collections.abc import Sequence

from calibration.infer.analyse import StageProposal
from calibration.infer.layout import stage_text
from calibration.infer.measure import with_stages
from calibration.infer.search import MAX_TERMS, TermFit
from calibration.infer.terms import Monomial, Point
from calibration.infer.time_terms import BYTES_WEIGHT, WORK_APPROXIMATE, TimeChoice


def _points(points: Sequence[Point], limit: int = 4) -> str:
    shown = [
        ",".join(f"{k}={v}" for k, v in p.items() if not isinstance(v, bool))
        for p in points[:limit]
    ]
    more = f" and {len(points) - limit} more" if len(points) > limit else ""
    return "; ".join(shown) + more


def _terms_text(terms: Sequence[Monomial]) -> str:
    if len(terms) == 1:
        return terms[0].text
    return "[" + ", ".join(m.text for m in terms) + "]"


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
    if p.iterations.formula is None:
        lines.append(f"# iterations: no formula of the grammar gives the counts {counts}")
    else:
        lines.append(
            f"# iterations: {len(p.counts)} sizes, counts {counts[:8]}"
            + (f"; rejected {reasons}" if reasons else "")
        )
        lines.append(f"iterations = {p.iterations.formula}")
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
        lines.append(f"memory ~ {_terms_text(p.memory.terms)}")
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
    return [head, f"time ~ {_terms_text(t.terms)}"] if t.terms else [head]


def _lets(proposals: Sequence[StageProposal]) -> list[str]:
    seen: dict[str, str] = {}
    for p in proposals:
        for m in p.memory.terms or ():
            for f in m.features:
                if f.let is not None and f.let_text is not None:
                    seen[f.let] = f.let_text
        for m in p.time.terms:
            for f in m.features:
                if f.let is not None and f.let_text is not None:
                    seen[f.let] = f.let_text
    return [
        f"    let {name} = {text}  # proposed: the floor division that fits"
        for name, text in seen.items()
    ]


def _minimums(proposals: Sequence[StageProposal]) -> list[str]:
    best: dict[str, tuple[int, str]] = {}
    for p in proposals:
        for r in p.regimes:
            if r.param not in best or r.minimum > best[r.param][0]:
                best[r.param] = (r.minimum, f"{p.plan.name} off the fit at {_points(r.dropped, 2)}")
    return [f"    probe {k} >= {n}  # {why}" for k, (n, why) in best.items()]


def draft_text(skeleton: str, proposals: Sequence[StageProposal], header: str) -> str:
    """The draft, formatted; the skeleton's own lines are kept as written."""
    blocks = [*_minimums(proposals), *_lets(proposals)]
    if blocks:
        blocks.append("")
    for p in proposals:
        blocks.append(stage_text(p.plan, stage_body(p)))
    text = header + with_stages(skeleton, "\n".join(blocks))
    return formatted(text)


def formatted(text: str) -> str:
    from dslc.fmt import format_source
    from dslc.source import SourceFile

    return format_source(SourceFile("<draft>", text))
