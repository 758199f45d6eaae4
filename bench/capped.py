"""Capped calibration on every tiny family: is a component larger than the device predicted as well
as uncapped?

    .venv/bin/python bench/capped.py [--cases flux-area,example-wan,...] [--json FILE]

For each case (bench/accuracy.py's held-out cases, each built-in example at its demo shapes and the
tiny SD 1.5 a user's factory returns): build the pipeline, read the groups diffusers' group
offloading moves (block level, one block a group, the weights outside the blocks one more) and
calibrate it (``calibrate_pipeline``, ``verify``: the target measured too, repeat 1) three ways:

- uncapped (everything resident);
- ``--calibrate-offload group`` on a device capped below the largest component (90 % of it), but
  never below what group offload needs at the target (one request at the target under group
  offload on an unbounded device: its highest phase peak, +2 %). Where that need reaches the
  component itself (the tiny models' activations or position tables dwarf their blocks), the cap
  is the need and the case says so (``whole fits``);
- ``auto`` under the same cap: resolved as ``dslc calibrate`` resolves it
  (``calibration.core.offload.chosen``); calibrated again only where it resolves to another
  placement than ``group`` (the same placement, the same run).

Printed per phase: the measured peak at the target, the raw prediction's and the bound's error,
capped beside uncapped; the memory findings of each (a finding capped only is named); and whether
the plan for the cap held on one measured request (``bench/realsize_plan.plan_and_validate``, the
lifecycle ``dslc plan --validate`` runs). Exit status 0 only when every capped run completed,
every capped bound is >= the measured peak, and within +5 % of it wherever the uncapped raw
prediction was within 1 %; no memory finding appears capped only; every plan held."""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from artifact.point import Point
from bench.accuracy import CASES, FORMULAS, machine, resolved
from bench.realsize_plan import plan_and_validate
from calibration.calibrate.loop import describe
from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.run import load_pipeline, shapes
from calibration.core.host import quiet_libraries
from calibration.core.offload import Offload, Placing, chosen
from calibration.core.shapes import Shapes
from calibration.examples import EXAMPLES, tiny_sd
from runtime.kinds import Quantity

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration
    from runtime import Pipeline

RAW_CLOSE = 0.01  # uncapped raw within this: the capped bound must be within BOUND_OVER
BOUND_OVER = 0.05
CAP_SHARE = 0.9  # of the largest component
NEED_SLACK = 0.02  # over group offload's need at the target


@attrs.frozen
class Case:
    """One pipeline at one set of shapes: how to build it, its formulas, what runs around it."""

    name: str
    build: Callable[[int], object]
    call_kwargs: Callable[[int], Mapping[str, object]]
    formulas: Pipeline
    shapes: Shapes
    context: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext


def _accuracy_case(name: str) -> Case:
    example, pipeline, full, context = resolved(name)
    return Case(name, example.build, example.call_kwargs, pipeline, full, context)


def _example_case(name: str) -> Case:
    example = EXAMPLES[name]
    pipeline = load_pipeline(FORMULAS / example.formula_file, example.pipeline)
    return Case(f"example-{name}", example.build, example.call_kwargs, pipeline, example.shapes)


def _tiny_sd_case(name: str = "tiny-sd", sizes: Shapes | None = None) -> Case:
    formulas = ROOT / "tests" / "calibration" / "data" / "custom_sd.wf"
    shapes = sizes or Shapes(
        {"steps": 2, "height": 64, "width": 64},
        {"steps": 2, "height": 128, "width": 128},
        {"steps": 2, "height": 256, "width": 256},
    )
    pipeline = load_pipeline(formulas, "custom_sd")
    return Case(name, tiny_sd.build, tiny_sd.call_kwargs, pipeline, shapes)


def _sizes(steps: int, side: int, frames: int | None = None) -> Point:
    return {
        "steps": steps,
        "height": side,
        "width": side,
        **({} if frames is None else {"frames": frames}),
    }


#: Sizes small enough that a cap below the largest component leaves the activations room (the
#: tiny models' activations outgrow their weights at the held-out targets): (warmup, probe, target)
SMALL: dict[str, tuple[Point, Point, Point]] = {
    "flux": (_sizes(1, 16), _sizes(1, 16), _sizes(2, 32)),
    "sdxl": (_sizes(1, 32), _sizes(2, 64), _sizes(2, 96)),
    "pixart": (_sizes(1, 16), _sizes(2, 32), _sizes(2, 48)),
    "wan": (_sizes(1, 16, 9), _sizes(2, 32, 9), _sizes(2, 48, 9)),
    "cogvideox": (_sizes(1, 16, 17), _sizes(2, 32, 17), _sizes(2, 48, 17)),
    "tiny-sd": (_sizes(1, 64), _sizes(2, 64), _sizes(2, 128)),
}


def _small_case(name: str) -> Case:
    warmup, probe, target = SMALL[name]
    if name == "tiny-sd":
        return _tiny_sd_case("small-tiny-sd", Shapes(warmup, probe, target))
    example = EXAMPLES[name]
    pipeline = load_pipeline(FORMULAS / example.formula_file, example.pipeline)
    full = shapes(pipeline, example.shapes, target=target, probe=probe, warmup=warmup)
    return Case(f"small-{name}", example.build, example.call_kwargs, pipeline, full)


def all_cases() -> dict[str, Callable[[], Case]]:
    """Every case by name, built when asked for (formulas compiled, nothing run)."""
    out: dict[str, Callable[[], Case]] = {n: functools.partial(_accuracy_case, n) for n in CASES}
    out.update({f"example-{n}": functools.partial(_example_case, n) for n in EXAMPLES})
    out["tiny-sd"] = _tiny_sd_case
    out.update({f"small-{n}": functools.partial(_small_case, n) for n in SMALL})
    return out


# --- the cap ----------------------------------------------------------------------------------


@attrs.frozen
class Groups:
    """A component's weights and what group offload holds of it at once: the weights outside its
    blocks and its largest block (0 where the hooks found no block)."""

    component: str
    whole: int
    outside: int
    largest_block: int
    count: int


def groups(pipe: object) -> dict[str, Groups]:
    """Each component's groups, read from diffusers' own hooks (installed, read, removed)."""
    from calibration.placement.groups import _storages, hooked_groups
    from calibration.placement.pipeline import offload_groups, remove_group_offload
    from runtime.measure.diffusers_hooks import pipeline_modules

    modules = pipeline_modules(pipe)  # type: ignore[arg-type]
    whole = {
        name: sum(t.untyped_storage().nbytes() for t in (*m.parameters(), *m.buffers()))
        for name, m in modules.items()
    }
    offload_groups("cpu", modules)
    try:
        out = {}
        for name, module in modules.items():
            sizes = {
                holder: sum(s.nbytes() for s in _storages(g).values())
                for holder, g in hooked_groups(module)
            }
            outside = sizes.pop("", 0)
            out[name] = Groups(
                name, whole[name], outside, max(sizes.values(), default=0), len(sizes)
            )
        return out
    finally:
        remove_group_offload(modules)


def cap_for(parts: Mapping[str, Groups], need: int) -> tuple[int, str]:
    """The cap: below the largest component (``CAP_SHARE`` of it), never below ``need``; and why
    it is what it is."""
    largest = max(parts.values(), key=lambda g: g.whole)
    below = int(largest.whole * CAP_SHARE)
    if below >= need:
        return below, f"{CAP_SHARE:.0%} of {largest.component}"
    if need < largest.whole:
        return need, f"need, below {largest.component}"
    return need, f"need (whole fits: {largest.component} {largest.whole:,} B)"


def group_need(case: Case) -> int:
    """What group offload holds at the target, measured: the highest phase peak of one request
    at the target under group offload on a device too large to refuse it (+2 %)."""
    from calibration.core.config import RunConfig
    from calibration.core.session import Session

    gc.collect()
    config = RunConfig(capacity=1 << 40, offload=Offload.GROUP, threads=1)
    with quiet_libraries(), case.context():
        session = Session.open(case.build(0), case.formulas, config, call_kwargs=case.call_kwargs)  # type: ignore[arg-type]
        with session.placement():
            record = session.run(case.shapes.target)
    if not record.ok:
        raise RuntimeError(f"{case.name}: the target failed under group offload: {record.error}")
    return int(max(p.peak_allocated for p in record.phases) * (1 + NEED_SLACK))


# --- the runs ---------------------------------------------------------------------------------


def calibrate(case: Case, offload: Placing, capacity: int | None) -> Calibration:
    """``dslc calibrate --verify --repeat 1`` of ``case`` under ``offload`` on a device capped at
    ``capacity`` (the time left unjudged: memory is what is compared)."""
    gc.collect()
    with quiet_libraries(), case.context():
        return calibrate_pipeline(
            case.build,
            case.formulas,
            case.shapes,
            call_kwargs=case.call_kwargs,
            verify=True,
            repeat=1,
            threads=1,
            time_tolerance=None,
            offload=offload,
            capacity=capacity,
        )


def phases(cal: Calibration) -> dict[str, tuple[int, int | None, int | None]]:
    """Each phase's (measured peak at the target, raw prediction, bound), by label."""
    if cal.measured is None or not cal.measured.ok:
        return {}
    measured = {(p.kind, p.name, p.stage): p.peak_allocated for p in cal.measured.phases}
    return {
        p.label: (measured[(p.kind, p.name, p.stage)], p.peak.raw_bytes, p.peak.bound_bytes)
        for p in cal.estimate.phases
        if (p.kind, p.name, p.stage) in measured
    }


def memory_findings(cal: Calibration) -> set[str]:
    """The calibration's memory findings, as ``kind: stage``."""
    return {f"{f.kind}: {f.stage}" for f in cal.findings if f.quantity == Quantity.MEMORY}


def run_case(case: Case) -> dict[str, Any]:
    """The case calibrated uncapped, under group and auto capped; its plan for the cap validated."""
    started = time.perf_counter()
    with quiet_libraries():
        parts = groups(case.build(0))
    uncapped = calibrate(case, Offload.NONE, None)
    need = group_need(case)
    cap, why = cap_for(parts, need)
    weights = {g.component: g.whole for g in parts.values()}
    auto = chosen(Offload.AUTO, weights, cap)
    grouped = _guarded(lambda: calibrate(case, Offload.GROUP, cap))
    resolved: Calibration | str | None = None  # group: the same run; none: the uncapped one
    if auto is Offload.MODEL:
        resolved = _guarded(lambda: calibrate(case, auto, cap))
    planned: tuple[list[str], bool] = (["not planned: the capped calibration failed"], False)
    if not isinstance(grouped, str) and phases(grouped):
        with case.context():
            planned = plan_and_validate(
                case.build, case.formulas, grouped, cap, call_kwargs=case.call_kwargs
            )
    return {
        "case": case.name,
        "groups": {name: attrs.asdict(g) for name, g in parts.items()},
        "cap": cap,
        "need": need,
        "cap_why": why,
        "auto": str(auto),
        "uncapped": _summary(uncapped),
        "group": _summary(grouped),
        "auto_run": _auto_run(auto, resolved, uncapped, cap),
        "plan": planned[0],
        "validated": planned[1],
        "seconds": time.perf_counter() - started,
    }


def _auto_run(
    auto: Placing, resolved: Calibration | str | None, uncapped: Calibration, cap: int
) -> dict[str, Any] | str:
    """What ``auto`` calibrated: the group run, a model-offload run, or (the weights fit the cap)
    everything resident: the uncapped run, whose target fits the cap or not."""
    if resolved is not None:
        return _summary(resolved)
    if auto is Offload.GROUP:
        return "the group run"
    assert uncapped.measured is not None
    peak = uncapped.measured.peak_allocated
    fits = "fits" if peak <= cap else "does not fit"
    return f"everything resident (the weights fit): the uncapped target's peak {peak:,} B {fits}"


def _guarded(run: Callable[[], Calibration]) -> Calibration | str:
    """A calibration, or the error it stopped with (a capped run that cannot go on is a result)."""
    try:
        return run()
    except Exception as exc:  # noqa: BLE001 -- reported in the table, the exit status 1
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _summary(cal: Calibration | str) -> dict[str, Any]:
    if isinstance(cal, str):
        return {"error": cal, "phases": {}, "findings": [], "errors": []}
    return {
        "offload": cal.offload,
        "phases": phases(cal),
        "findings": sorted(memory_findings(cal)),
        "errors": list(cal.errors),
        "extra_cost": float(cal.extra_cost),
        "extras": [f"{describe(e.point)} ({e.reason})" for e in cal.extras],
    }


# --- judging and printing ---------------------------------------------------------------------


def _share(value: int | None, measured: int | None) -> float | None:
    return None if value is None or not measured else (value - measured) / measured


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:+.2f} %"


def problems(result: Mapping[str, Any], same_bytes: bool = False) -> list[str]:
    """What fails the case: a capped run that stopped or lost requests, a capped bound under the
    measured peak or over +5 % where uncapped raw was within 1 % (with ``same_bytes``: and more
    bytes over than the uncapped bound), a memory finding capped only, a plan that did not hold."""
    out = []
    base = result["uncapped"]["phases"]
    runs = [("group", result["group"])]
    if isinstance(result["auto_run"], dict):
        runs.append(("auto", result["auto_run"]))
    for name, run in runs:
        if run.get("error") or run["errors"] or not run["phases"]:
            out.append(f"{name}: {run.get('error') or '; '.join(run['errors']) or 'no target'}")
            continue
        for label, (measured, _, bound) in run["phases"].items():
            u_measured, u_raw, u_bound = base.get(label, (0, None, None))
            over = _share(bound, measured)
            if over is None or over < 0:
                out.append(f"{name}: {label} bound {_pct(over)}")
                continue
            close = _share(u_raw, u_measured)
            tight = close is not None and abs(close) <= RAW_CLOSE
            alike = same_bytes and _bytes_over(bound, measured) <= _bytes_over(u_bound, u_measured)
            if tight and over > BOUND_OVER and not alike:
                out.append(f"{name}: {label} bound {_pct(over)} (uncapped raw {_pct(close)})")
        only = sorted(set(run["findings"]) - set(result["uncapped"]["findings"]))
        out += [f"{name}: capped only: {f}" for f in only]
    if not result["validated"]:
        out.append("the plan for the cap did not hold")
    return out


def _bytes_over(bound: int | None, measured: int) -> int:
    """How far a bound lies over the measured peak, in bytes (a missing bound: none over)."""
    return 0 if bound is None else max(bound - measured, 0)


def markdown(result: Mapping[str, Any], same_bytes: bool = False) -> str:
    """The case's table: per phase, uncapped beside capped (group)."""
    parts = ", ".join(
        f"{g['component']} {g['whole']:,} B ({g['count']} blocks, largest {g['largest_block']:,}, "
        f"outside {g['outside']:,})"
        for g in result["groups"].values()
    )
    lines = [
        f"### {result['case']}",
        "",
        (
            f"Components: {parts}. Cap {result['cap']:,} B ({result['cap_why']}; group offload "
            f"needs {result['need']:,} B at the target); auto resolves to `{result['auto']}`."
        ),
        "",
        (
            "| phase | uncapped measured | raw | bound | capped measured | raw | bound "
            "| bound over, B: capped / uncapped |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    base, capped = result["uncapped"]["phases"], result["group"]["phases"]
    for label in dict.fromkeys([*base, *capped]):
        u = base.get(label, (0, None, None))
        c = capped.get(label, (0, None, None))
        lines.append(
            f"| {label} | {u[0]:,} | {_pct(_share(u[1], u[0]))} | {_pct(_share(u[2], u[0]))} | "
            f"{c[0]:,} | {_pct(_share(c[1], c[0]))} | {_pct(_share(c[2], c[0]))} | "
            f"{_bytes_over(c[2], c[0]):,} / {_bytes_over(u[2], u[0]):,} |"
        )
    if isinstance(result["auto_run"], str):
        lines += ["", f"auto: {result['auto_run']}."]
    lines += ["", "Memory findings: uncapped " + _listed(result["uncapped"]["findings"])]
    lines[-1] += "; capped " + _listed(result["group"]["findings"]) + "."
    lines += ["", _extras(result["uncapped"], result["group"])]
    lines += ["", f"Plan for the cap: {'held' if result['validated'] else 'NOT held'}."]
    if not result["validated"]:
        lines += ["", "```", *result["plan"], "```"]
    trouble = problems(result, same_bytes)
    lines += ["", "Problems: " + ("; ".join(trouble) if trouble else "none") + "."]
    return "\n".join(lines)


def _extras(uncapped: Mapping[str, Any], capped: Mapping[str, Any]) -> str:
    """The sizes each run added beyond the probe and their cost next to the target's (a --json
    file written before they were kept has none)."""
    if "extra_cost" not in capped:
        return "Extra sizes: not recorded."
    return (
        f"Extra sizes' cost (of the target's): uncapped {uncapped.get('extra_cost', 0):.4f}; "
        f"capped {capped['extra_cost']:.4f}: {_listed(capped['extras'])}."
    )


def _listed(items: Sequence[str]) -> str:
    return ", ".join(items) if items else "none"


def summary(results: Sequence[Mapping[str, Any]], same_bytes: bool = False) -> str:
    """One line per case: the worst capped raw and bound errors, the findings, the plan."""
    lines = [
        (
            "| case | cap | auto | worst raw capped / uncapped | raw error apart, B (max) "
            "| bound over capped (max) | bound >= measured | findings same | plan held | problems |"
        ),
        "| --- | --- | --- | ---: | ---: | ---: | :---: | :---: | :---: | ---: |",
    ]
    for r in results:
        capped, base = r["group"]["phases"], r["uncapped"]["phases"]
        bounds = [_share(b, m) for m, _, b in capped.values()]
        lines.append(
            f"| {r['case']} | {r['cap_why']} | {r['auto']} | "
            f"{_pct(_worst(capped))} / {_pct(_worst(base))} | {_apart(capped, base)} | "
            f"{_pct(max((b for b in bounds if b is not None), default=None))} | "
            f"{'yes' if capped and all(b is not None and b >= 0 for b in bounds) else 'NO'} | "
            f"{'yes' if r['group']['findings'] == r['uncapped']['findings'] else 'NO'} | "
            f"{'yes' if r['validated'] else 'NO'} | {len(problems(r, same_bytes))} |"
        )
    return "\n".join(lines)


def _apart(capped: Mapping[str, Sequence[Any]], base: Mapping[str, Sequence[Any]]) -> str:
    """How far the capped raw error lies from the uncapped one, in bytes, at the worst phase: the
    capped peaks hold fewer weights, so the same bytes off read as a larger share."""
    gaps = [
        abs((c[1] - c[0]) - (base[label][1] - base[label][0]))
        for label, c in capped.items()
        if label in base and c[1] is not None and base[label][1] is not None
    ]
    return f"{max(gaps):,}" if gaps else "-"


def _worst(rows: Mapping[str, Sequence[int | None]]) -> float | None:
    errors = [_share(raw, m) for m, raw, _ in rows.values()]
    return max((e for e in errors if e is not None), key=abs, default=None)


def main(argv: Sequence[str] | None = None) -> int:
    known = all_cases()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(known), help=f"from {', '.join(known)}")
    parser.add_argument("--json", type=Path, help="also write every number to this file")
    parser.add_argument(
        "--from-json", type=Path, help="print the tables of an earlier --json run, running nothing"
    )
    parser.add_argument(
        "--same-bytes",
        action="store_true",
        help="a capped bound over +5 %% passes when it lies no more bytes over than the uncapped "
        "one (its peak is smaller by the weights left off the device)",
    )
    args = parser.parse_args(argv)
    if args.from_json:
        results = json.loads(args.from_json.read_text())
        for result in results:
            print(markdown(result, args.same_bytes), end="\n\n")
    else:
        results = _run(parser, known, args.cases, args.json, args.same_bytes)
    print(summary(results, args.same_bytes), end="\n\n")
    print(f"Machine: {machine()}")
    return 1 if any(problems(r, args.same_bytes) for r in results) else 0


def _run(
    parser: argparse.ArgumentParser,
    known: Mapping[str, Callable[[], Case]],
    cases: str,
    out: Path | None,
    same_bytes: bool,
) -> list[dict[str, Any]]:
    names = [n.strip() for n in cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(known)}")
    results = []
    for name in names:
        result = run_case(known[name]())
        results.append(result)
        print(markdown(result, same_bytes), end="\n\n", flush=True)
        if out:
            out.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return results


if __name__ == "__main__":
    sys.exit(main())
