"""Accuracy of the estimators on real (tiny) diffusers pipelines: predicted vs measured at a target.

    .venv/bin/python bench/accuracy.py [--repeat 5] [--cases wan-area,flux-area,...] [--json FILE]

For each case: build the pipeline (random weights, CPU) and run the one calibration loop that `dslc
calibrate` runs (``calibration.calibrate.run.calibrate_session``): a bounded warmup, ``--repeat``
rounds of the probe, the extra probes the policy picks and a bounded re-warm, the findings, the
estimate (margin 1.0 for the prediction, the default 1.2 for the bound), then ``--repeat`` runs of
the target. Printed per phase: the measured peak, our prediction and its error, our bound and
whether it holds, and the seed's two baselines:

- ``seed w*h*f``: the seed's estimator (measurement if one covers the target, else a fit on the two
  largest sizes, else single-point scaling) in units of width x height x frames instead of the
  formula's measure, margin 1.0;
- ``single-point``: the largest record's above-baseline peak x the width x height x frames ratio
  (``calibration.calibrate.warmup.predict_peak``'s rule), margin 1.0.

Then the request time: predicted vs measured (the median of ``--repeat`` target runs; the
estimators take the median of each size's runs). A summary table closes the output. Times are this
thread's CPU time (other jobs on a shared machine do not count); memory is counted exactly by the
CPU live-tensor tracker."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import platform
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from artifact.spelling import point_text
from calibration.calibrate.run import calibrate_session, load_pipeline, shapes, work_ratio
from calibration.core.host import quiet_libraries, torch_threads
from calibration.core.session import Session
from calibration.examples import EXAMPLES
from runtime.estimate import DEFAULT_MARGIN

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration
    from calibration.core.shapes import Shapes
    from calibration.examples import Example
    from runtime import Pipeline

FORMULAS = Path(__file__).resolve().parent.parent / "formulas"

Point = dict[str, int | bool]

#: name -> (example or variant, warmup, probe (or probes: the first is *the* probe, the others more
#: sizes recorded alongside it; without them, `dslc calibrate`'s second probe when the warmup and
#: the probe leave a memory term open), target, what it shows); params left out: the first probe's /
#: target's.
CASES: dict[str, tuple[str, Point | None, Point | tuple[Point, ...], Point, str]] = {
    "wan-area": (
        "wan",
        {"height": 32, "width": 32},
        {"steps": 2, "height": 48, "width": 48},
        {"steps": 8, "frames": 17, "height": 64, "width": 64},
        "video, area and steps grow (the `dslc calibrate` default)",
    ),
    "wan-far": (
        "wan",
        {"height": 16, "width": 16},
        {"steps": 2, "height": 32, "width": 32},
        {"steps": 8, "frames": 17, "height": 96, "width": 96},
        "video, 9x the probe's area, 4x its steps",
    ),
    "wan-nocfg": (
        "wan",
        {"height": 32, "width": 32},
        {"steps": 2, "height": 48, "width": 48},
        {"steps": 6, "frames": 9, "height": 80, "width": 80, "cfg": False},
        "video without CFG (one transformer pass per step)",
    ),
    "wan-frames": (
        "wan",
        {"frames": 9},
        {"steps": 2, "frames": 13},
        {"steps": 8, "frames": 33, "height": 64, "width": 64},
        "video, frames-first probe (the area of the target, fewer frames)",
    ),
    "wan-mixed": (
        "wan",
        {"frames": 9, "height": 32, "width": 32},
        ({"steps": 2, "frames": 9, "height": 48, "width": 48}, {"steps": 2, "frames": 13}),
        {"steps": 8, "frames": 33, "height": 64, "width": 64},
        "video, area and frames grow: two probes, one wider, one longer (both memory terms move)",
    ),
    "wan-math-attention": (
        "wan-math-attention",
        {"height": 32, "width": 32},
        {"steps": 2, "height": 64, "width": 64},
        {"steps": 8, "frames": 17, "height": 128, "width": 128},
        "video, attention without a fused kernel (tokens x tokens scores): two memory terms",
    ),
    "wan-single": (
        "wan",
        None,
        {"steps": 2, "height": 48, "width": 48},
        {"steps": 8, "frames": 17, "height": 64, "width": 64},
        "video, the probe alone (no warmup size: the loop adds one for time)",
    ),
    "flux-area": (
        "flux",
        {"height": 64, "width": 64},
        {"steps": 2, "height": 96, "width": 96},
        {"steps": 8, "height": 128, "width": 128},
        "image, area and steps grow (the `dslc calibrate --example flux` default)",
    ),
    "flux-single": (
        "flux",
        None,
        {"steps": 2, "height": 96, "width": 96},
        {"steps": 8, "height": 128, "width": 128},
        "image, the probe alone (no warmup size: the loop adds sizes)",
    ),
    "flux-far": (
        "flux",
        {"height": 32, "width": 32},
        {"steps": 2, "height": 64, "width": 64},
        {"steps": 8, "height": 192, "width": 192},
        "image, 9x the probe's area, 4x its steps",
    ),
    "sdxl-area": (
        "sdxl",
        {"height": 64, "width": 64},
        {"steps": 2, "height": 128, "width": 128},
        {"steps": 8, "height": 256, "width": 256},
        "UNet image, area and steps grow (the `--example sdxl` default)",
    ),
    "sdxl-nocfg": (
        "sdxl",
        {"height": 64, "width": 64},
        {"steps": 2, "height": 96, "width": 96},
        {"steps": 6, "height": 192, "width": 192, "cfg": False},
        "UNet image without CFG (a batch of one)",
    ),
    "cogvideox-mixed": (
        "cogvideox",
        {"frames": 17, "height": 32, "width": 32},
        {"steps": 2, "frames": 25, "height": 48, "width": 48},
        {"steps": 4, "frames": 33, "height": 64, "width": 64},
        "video DiT, frames, area and steps grow (the `--example cogvideox` default)",
    ),
    "cogvideox-frames": (
        "cogvideox",
        {"frames": 17},
        {"steps": 2, "frames": 25},
        {"steps": 8, "frames": 49, "height": 48, "width": 48},
        "video DiT, frames-first probe (the area of the target, fewer frames)",
    ),
    "pixart-area": (
        "pixart",
        {"height": 64, "width": 64},
        {"steps": 3, "height": 128, "width": 128},
        {"steps": 12, "height": 256, "width": 256},
        "image DiT, area and steps grow (the `--example pixart` default)",
    ),
    "pixart-far": (
        "pixart",
        {"height": 32, "width": 32},
        {"steps": 3, "height": 64, "width": 64},
        {"steps": 12, "height": 192, "width": 192},
        "image DiT, 9x the probe's area, 4x its steps",
    ),
}
DEFAULT_CASES = tuple(CASES)


@contextlib.contextmanager
def math_attention() -> Iterator[None]:
    """SDPA's math backend: what runs when no fused kernel applies; it materialises the scores."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        yield


#: example variants: name -> (example, the formula pipeline that describes it, what every run is in)
Context = Callable[[], contextlib.AbstractContextManager[None]]
VARIANTS: dict[str, tuple[str, str, Context]] = {
    "wan-math-attention": ("wan", "wan2_1_t2v_1_3b_math_attention", math_attention),
}


# --- the seed's two baselines ---------------------------------------------------------------------


def units(params: Mapping[str, Any]) -> int:
    """width x height x frames (frames 1 for an image), the seed's workload units."""
    return int(params.get("width", 1)) * int(params.get("height", 1)) * int(params.get("frames", 1))


def seed_estimate(points: Sequence[tuple[int, int, int]], target: int) -> int | None:
    """The seed's ``estimate_default_workload_peak_bytes`` at margin 1.0 over (units, peak,
    baseline).
    """
    if not points:
        return None
    by_units: dict[int, int] = {}
    for u, peak, _ in points:
        by_units[u] = max(by_units.get(u, 0), peak)
    covering = [peak for u, peak in by_units.items() if u >= target]
    if covering:
        return max(covering)
    if len(by_units) >= 2:
        (u2, p2), (u1, p1) = sorted(by_units.items(), reverse=True)[:2]
        slope = Fraction(p2 - p1, u2 - u1)
        if slope >= 0:
            return math.ceil(p2 - slope * u2 + slope * target)
    return max(
        baseline + math.ceil(Fraction((peak - min(baseline, peak)) * target, u))
        for u, peak, baseline in points
    )


def single_point(points: Sequence[tuple[int, int, int]], target: int) -> int | None:
    """The largest record's above-baseline peak scaled by the units ratio
    (calibration.calibrate.warmup.predict_peak's rule).
    """
    if not points:
        return None
    u, peak, baseline = max(points, key=lambda p: (p[0], p[1]))
    return baseline + math.ceil(Fraction((peak - baseline) * target, u))


# --- one case -------------------------------------------------------------------------------------


def resolved(name: str) -> tuple[Example, Pipeline, Shapes, Context]:
    """Case ``name``'s example, its formulas (a variant's where it names one), its complete
    shapes and the context it runs in: what this script and bench/capped.py calibrate."""
    example_name, warmup, probes, target, _ = CASES[name]
    context: Context = contextlib.nullcontext
    formula_pipeline = None
    if example_name in VARIANTS:
        example_name, formula_pipeline, context = VARIANTS[example_name]
    example = EXAMPLES[example_name]
    pipeline = load_pipeline(FORMULAS / example.formula_file, formula_pipeline or example.pipeline)
    probe = probes[0] if isinstance(probes, tuple) else probes
    full = shapes(pipeline, example.shapes, target=target, probe=probe, warmup=warmup)
    return example, pipeline, full, context


def run_case(name: str, repeat: int, threads: int) -> dict[str, Any]:
    warmup, what = CASES[name][1], CASES[name][4]
    example, pipeline, full, context = resolved(name)
    target_point, probe_point, warmup_point = full.target, full.probe, full.warmup
    with quiet_libraries(), torch_threads("cpu", threads), context():
        session = Session(example.build(0), pipeline, "cpu", call_kwargs=example.call_kwargs)
        if warmup is None:  # the probe alone: no warmup size of its own
            warmup_point = probe_point
        cal = calibrate_session(
            session,
            target=target_point,
            probe=probe_point,
            warmup=warmup_point,
            margin=DEFAULT_MARGIN,
            verify=True,
            repeat=repeat,
        )
    return {
        "case": name,
        "what": what,
        "example": example.name,
        "pipeline": pipeline.name,
        "warmup": None if warmup is None else warmup_point,
        "probe": probe_point,
        "more_probes": [e.point for e in cal.extras],
        "extra_cost": sum(e.cost for e in cal.extras),
        "target": target_point,
        "work_ratio": float(work_ratio(pipeline, probe_point, target_point)),
        "rows": _rows(cal, units(target_point)),
        "findings": [f"{f.kind}: {f.stage} {f.quantity}" for f in cal.findings],
        "time": _timing(cal),
        "errors": list(cal.errors),
    }


def _rows(cal: Calibration, target_units: int) -> list[dict[str, Any]]:
    """Per phase, then the request: measured, predicted and bound peaks beside the seed's two
    baselines over the records that ran."""
    result, measured = cal.estimate, cal.measured
    assert measured is not None
    ok = [r for r in cal.records if r.ok]
    rows = []
    measured_peaks = {(p.kind, p.name, p.stage): p.peak_allocated for p in measured.phases}
    for p in result.phases:
        points = [
            (units(r.params), ph.peak_allocated, r.baseline_allocated)
            for r in ok
            for ph in r.phases
            if (ph.kind, ph.name, ph.stage) == (p.kind, p.name, p.stage)
        ]
        rows.append(
            _row(
                p.label,
                p.peak.method,
                measured_peaks.get((p.kind, p.name, p.stage)),
                p.peak.raw_bytes,
                p.peak.bound_bytes,
                seed_estimate(points, target_units),
                single_point(points, target_units),
            )
        )
    request_points = [(units(r.params), r.peak_allocated, r.baseline_allocated) for r in ok]
    rows.append(
        _row(
            "request",
            result.request_peak.method,
            measured.peak_allocated,
            result.request_peak.raw_bytes,
            result.request_peak.bound_bytes,
            seed_estimate(request_points, target_units),
            single_point(request_points, target_units),
        )
    )
    return rows


def _timing(cal: Calibration) -> dict[str, Any]:
    """The request time and each stage's, predicted vs measured, with the target's runs."""
    timing, measured = cal.estimate.timing, cal.measured
    assert measured is not None
    return {
        "predicted_ms": None if timing.seconds is None else timing.seconds * 1e3,
        "measured_ms": measured.duration_s * 1e3,
        "method": timing.method,
        "spread_ms": None if timing.spread_s is None else timing.spread_s * 1e3,
        "target_runs_ms": sorted(r.duration_s * 1e3 for r in cal.target_runs if r.ok),
        "stages": {
            s.stage: {
                "predicted_ms": None if s.seconds is None else s.seconds * 1e3,
                "measured_ms": measured.stage_durations.get(s.stage, 0.0) * 1e3,
            }
            for s in timing.stages
        },
    }


def _row(
    label: str,
    method: str,
    measured: int | None,
    raw: int | None,
    bound: int | None,
    seed: int | None,
    single: int | None,
) -> dict[str, Any]:
    return {
        "phase": label,
        "method": method,
        "measured": measured,
        "predicted": raw,
        "bound": bound,
        "seed_units": seed,
        "single_point": single,
    }


# --- printing -------------------------------------------------------------------------------------


def _err(value: float | None, measured: float | None) -> str:
    if value is None or not measured:
        return "-"
    return f"{(value - measured) / measured * 100:+.1f}%"


def _kib(value: int | None) -> str:
    return "-" if value is None else f"{value / 1024:,.1f}"


def _point(params: Mapping[str, Any]) -> str:
    return point_text(params)


def markdown(case: dict[str, Any]) -> str:
    lines = [
        f"### {case['case']}: {case['what']}",
        "",
        (
            f"`{case['pipeline']}`; "
            + (f"warmup `{_point(case['warmup'])}`, " if case["warmup"] else "no warmup, ")
            + f"probe `{_point(case['probe'])}`, "
            + "".join(f"extra probe `{_point(m)}`, " for m in case["more_probes"])
            + f"target `{_point(case['target'])}` "
            + f"({case['work_ratio']:.3g}x the probe in tokens x steps)."
        ),
        "",
        (
            "| phase | method | measured KiB | ours KiB | err | bound (1.2) KiB "
            "| bound >= measured "
            "| seed w*h*f KiB | err | single-point KiB | err |"
        ),
        "| --- | --- | ---: | ---: | ---: | ---: | :---: | ---: | ---: | ---: | ---: |",
    ]
    for r in case["rows"]:
        holds = (
            "-"
            if r["bound"] is None or r["measured"] is None
            else ("yes" if r["bound"] >= r["measured"] else "NO")
        )
        lines.append(
            f"| {r['phase']} | {r['method']} | {_kib(r['measured'])} | {_kib(r['predicted'])} | "
            f"{_err(r['predicted'], r['measured'])} | {_kib(r['bound'])} | {holds} | "
            f"{_kib(r['seed_units'])} | {_err(r['seed_units'], r['measured'])} | "
            f"{_kib(r['single_point'])} | {_err(r['single_point'], r['measured'])} |"
        )
    t = case["time"]
    spread = "" if t["spread_ms"] is None else f" (two sigma {2 * t['spread_ms']:.0f} ms)"
    predicted = "-" if t["predicted_ms"] is None else f"{t['predicted_ms']:.0f} ms"
    lines += [
        "",
        f"Request time ({t['method']}): predicted {predicted}{spread}, measured "
        f"{t['measured_ms']:.0f} ms: {_err(t['predicted_ms'], t['measured_ms'])}. Per stage: "
        + "; ".join(
            f"{s} {v['predicted_ms'] or 0:.0f} / {v['measured_ms']:.0f} ms"
            for s, v in t["stages"].items()
        )
        + "."
        + _runs(t),
    ]
    if case["findings"]:
        lines += ["", "Findings: " + "; ".join(case["findings"])]
    if case["errors"]:
        lines += ["", "Failed requests: " + "; ".join(case["errors"])]
    return "\n".join(lines)


def machine() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            cpu = next(
                (line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")),
                cpu,
            )
    except OSError:
        pass
    load = " / ".join(f"{x:.1f}" for x in __import__("os").getloadavg())
    return (
        f"{cpu}, {__import__('os').cpu_count()} cores, torch {torch.__version__}, Python "
        f"{platform.python_version()}; load average {load}"
    )


def summary(results: Sequence[dict[str, Any]]) -> str:
    """One line per case: the worst raw peak error over every phase, the bound (and how far over the
    measured peak it reaches) beside the extra sizes' cost, the request time."""
    lines = [
        (
            "| case | target/probe | worst raw peak error | bound >= measured | bound over (max) "
            "| extra cost | request time error | two sigma | target runs apart | a miss: why |"
        ),
        "| --- | ---: | ---: | :---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for case in results:
        errors = [
            (r["predicted"] - r["measured"]) / r["measured"]
            for r in case["rows"]
            if r["predicted"] is not None and r["measured"]
        ]
        worst = max(errors, key=abs, default=None)
        holds = all(
            r["bound"] >= r["measured"]
            for r in case["rows"]
            if r["bound"] is not None and r["measured"] is not None
        )
        over = max(
            (
                r["bound"] / r["measured"] - 1
                for r in case["rows"]
                if r["bound"] is not None and r["measured"]
            ),
            default=None,
        )
        cost = case.get("extra_cost")
        t = case["time"]
        lines.append(
            f"| {case['case']} | {case['work_ratio']:.3g}x | "
            + ("-" if worst is None else f"{worst * 100:+.1f} %")
            + f" | {'yes' if holds else 'NO'} | "
            + ("-" if over is None else f"{over * 100:+.2f} %")
            + " | "
            + ("-" if cost is None else f"{cost:.2f}x")
            + f" | {_err(t['predicted_ms'], t['measured_ms'])} | "
            + _sigma(t)
            + " | "
            + (_apart(t["target_runs_ms"]) if len(t.get("target_runs_ms") or []) > 1 else "-")
            + f" | {miss_reason(t) or '-'} |"
        )
    reasons = [miss_reason(case["time"]) for case in results]
    misses = [r for r in reasons if r]
    lines += [
        "",
        f"Request time within +-15 %: {len(results) - len(misses)} of {len(results)} cases.",
    ]
    if misses:
        counts = {why: misses.count(why) for why in dict.fromkeys(misses)}
        lines.append("Misses: " + "; ".join(f"{n} {why}" for why, n in counts.items()) + ".")
    return "\n".join(lines)


#: Why a prediction can miss the measured target by more than the goal, checked in this order.
INSIDE_RUNS = "inside the target's own runs"
WITHIN_SIGMA = "within its two sigma"
UNEXPLAINED = "neither (unexplained)"


def miss_reason(t: Mapping[str, Any], goal: float = 0.15) -> str | None:
    """None when the request time is within ``goal`` of the measured; else why it is not: the
    prediction lies between the target's own fastest and slowest run (the measurement itself is
    not known closer), or within the prediction's two sigma, or neither."""
    predicted, measured = t["predicted_ms"], t["measured_ms"]
    if predicted is not None and abs(predicted - measured) <= goal * measured:
        return None
    if predicted is None:
        return UNEXPLAINED
    runs = t.get("target_runs_ms") or []
    if len(runs) > 1 and min(runs) <= predicted <= max(runs):
        return INSIDE_RUNS
    if t["spread_ms"] is not None and abs(predicted - measured) <= 2 * t["spread_ms"]:
        return WITHIN_SIGMA
    return UNEXPLAINED


def _runs(t: Mapping[str, Any]) -> str:
    """The target's own runs: how far apart the same request measured."""
    runs = t.get("target_runs_ms") or []
    if len(runs) < 2:
        return ""
    return " Target runs: " + ", ".join(f"{r:.0f}" for r in runs) + f" ms ({_apart(runs)} apart)."


def _apart(runs: Sequence[float]) -> str:
    """The fastest and the slowest of the same request, as a share of the median."""
    return f"{(runs[-1] - runs[0]) / runs[len(runs) // 2] * 100:.0f} %"


def _sigma(t: Mapping[str, Any]) -> str:
    """Two sigma of the predicted request time, as a share of the prediction."""
    if t["spread_ms"] is None or not t["predicted_ms"]:
        return "-"
    return f"+-{2 * t['spread_ms'] / t['predicted_ms'] * 100:.1f} %"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cases", default=",".join(DEFAULT_CASES), help=f"comma-separated, from {', '.join(CASES)}"
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="probe and target runs per case (the median counts)"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write every number to this file")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    results = []
    for name in names:
        case = run_case(name, args.repeat, args.threads)
        results.append(case)
        print(markdown(case), end="\n\n", flush=True)
    print(summary(results), end="\n\n")
    print(f"Machine: {machine()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
