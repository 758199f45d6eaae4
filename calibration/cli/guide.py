"""The words around `dslc calibrate`'s tables for a first reader: what runs and why, what each
column and label means (once), and the command that comes next (data only, no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from artifact.spelling import path_text, point_text
from calibration.calibrate.run import Calibration
from calibration.examples import EXAMPLES

#: Every term the tables and the lines above them use, each explained once (``--quiet`` drops it).
LEGEND = (
    "how to read it:",
    (
        "  probe, probe N: the cheap sizes measured; each extra one pins down a term of the "
        "formulas at the target (its cost: one run, over one run of the target); re-warm: the "
        "warmup again after them, as a serving worker's pool is"
    ),
    (
        "  memory rows: stage:S the whole stage S; component:C@S component C running inside S; "
        "setup:S@S the work of S outside its loop (latents, scheduler); request: the whole call"
    ),
    (
        "  method: measurement (measured at the target's own values), fit (the formulas' terms "
        "fitted over the sizes, evaluated at the target), scaled (a measured peak carried along "
        "the stage's memory measure), none (no estimate)"
    ),
    (
        "  margin: what pads the prediction into the bound: evidence N (from how well the fit held "
        "at sizes beyond those it passes through), fixed N (--margin, without such evidence); "
        "-: nothing extrapolated, nothing padded"
    ),
    (
        "  predicted peak / peak bound: the estimate at the target, and it times the margin: what "
        "to budget with; both include the weights on the device (`dslc plan`'s activation bound "
        "leaves them out)"
    ),
    (
        "  measured peak, error, bound >= measured: the target run for real (--verify), "
        "(predicted - measured) / measured, and whether the bound held"
    ),
    (
        "  two sigma: the time's spread over the repeated runs, either way; (outside stages): the "
        "call's time outside every declared stage"
    ),
    (
        "  the backend in brackets is how memory is measured (cpu-live-tensors: every live "
        "tensor's bytes, exactly; allocator: the CUDA caching allocator's peaks)"
    ),
)

#: Each term of the legend in full, for `--explain` (printed under the report, --quiet or not).
EXPLAINED = (
    (
        "warmup, probe, probe N, re-warm",
        (
            "The warmup runs first so one-time costs (lazy initialisation, the allocator growing "
            "its pools) stay out of the sizes measured after it. The probe is the cheap size "
            "every estimate starts from. An extra probe (probe 2, probe 3, ...) is added where one "
            "size cannot tell a term of the formulas from another at the target (a `height * "
            "width` from a `height` alone); its line says which term it pins and what it costs: "
            "one run of it over one run of the target. The re-warm runs the warmup again after "
            "the probes, so the pipeline ends as a serving worker's pool would find it."
        ),
    ),
    (
        "memory rows",
        (
            "stage:S is the peak of the whole stage S (every iteration); component:C@S the peak "
            "while component C runs inside S; setup:S@S the work of S outside its loop (preparing "
            "latents, the scheduler); request the peak of the whole call, every stage together."
        ),
    ),
    (
        "method",
        (
            "measurement: the target's own values were measured (nothing is extrapolated). fit: "
            "the formulas' terms fitted through the measured sizes and evaluated at the target. "
            "scaled: a measured peak carried to the target along the stage's memory measure (how "
            "its terms grow between the two sizes). none: no estimate for that row."
        ),
    ),
    (
        "margin",
        (
            "The factor that pads the prediction into the bound. evidence N: the sizes show that "
            "the terms explain every measurement (each param moved, a size beyond those the fit "
            "passes through), so the margin is 1 + max(2 %, 2 x the misfit there) + 4 % x ln(how "
            "far the target lies beyond the largest size). fixed N: --margin, used where there is "
            "no such evidence. -: nothing extrapolated, so nothing padded."
        ),
    ),
    (
        "predicted peak, peak bound",
        (
            "The estimate at the target, and it times the margin. Budget with the bound. Both "
            "include the weights on the device; `dslc plan`'s activation bound leaves them out."
        ),
    ),
    (
        "measured peak, error, bound >= measured",
        (
            "With --verify the target runs for real: its peak, (predicted - measured) / measured, "
            "and whether the bound held (a bound under the measured peak exits 4)."
        ),
    ),
    (
        "two sigma, (outside stages)",
        (
            "The time's spread over the repeated runs, either way: a prediction within it is as "
            "good as the runs allow. (outside stages) is the call's time spent in no declared "
            "stage."
        ),
    ),
    (
        "the backend",
        (
            "How memory is measured. cpu-live-tensors: the bytes of every live tensor, exactly (on "
            "the CPU: the fits are exact). allocator: the CUDA caching allocator's peaks (what the "
            "device holds, its rounding and caching included)."
        ),
    ),
)

#: The capacity the next command's example plans for: a common consumer card.
EXAMPLE_CAPACITY = "24GiB"
HINT = f"your device's memory in place of {EXAMPLE_CAPACITY}"


def headline(cal: Calibration) -> str:
    """The first line: the pipeline, where it runs, and the target with why that one."""
    kind = "example" if cal.example in EXAMPLES else "pipeline"
    source = f"{kind} {cal.example}, " if cal.example else ""
    return (
        f"calibrating {cal.pipeline} ({source}formulas {cal.formula_path}) on {cal.device} "
        f"({cal.backend}): measures cheap sizes to estimate the target "
        f"{point_text(cal.shapes.target)}, {target_why(cal)}"
    )


def target_why(cal: Calibration) -> str:
    """Why the target is the one estimated: the example's stand-in, the default or as asked."""
    default = dict(cal.default_workload)
    if default and dict(cal.shapes.target) == default:
        return "the formulas' default workload"
    example = EXAMPLES.get(cal.example)
    shown = f" {point_text(default)}" if default else ""
    if example is not None and all(
        cal.shapes.target.get(k) == v for k, v in example.target.items()
    ):
        return (
            f"the example's CPU-sized stand-in for the default workload{shown} (a real "
            "pipeline's target: --target)"
        )
    return f"as asked (the default workload:{shown or ' unknown'})"


def next_line(save: Path | None) -> str:
    """The command that comes after a calibration: plan from it (saved first, if it was not)."""
    plan = f"dslc plan --calibration {{}} --device-memory {EXAMPLE_CAPACITY}"
    if save is not None:
        return f"next: {plan.format(path_text(save))}  ({HINT})"
    return (
        "next: the same command with --save calibration.json, then "
        f"{plan.format('calibration.json')}  ({HINT})"
    )


def explained(width: int = 100, terms: Sequence[tuple[str, str]] = EXPLAINED) -> list[str]:
    """`--explain`'s lines: each term of the legend (``terms``: calibrate's unless given), then
    its full explanation, wrapped."""
    import textwrap

    out = ["each term in full:"]
    for term, text in terms:
        out.append(f"  {term}")
        out += textwrap.wrap(text, width, initial_indent="    ", subsequent_indent="    ")
    return out
