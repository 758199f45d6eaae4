"""Time alarms under load: every example calibrated `--runs` times beside a busy neighbour (a
process spinning a core), counting time findings by kind (issue 41: a time `formula-mismatch`
needs clean evidence; a loaded clock gives a `time-unknown` note at most).

    .venv/bin/python bench/time_load.py --runs 10

Prints one line per run as it ends (its alarms named, so a run cut short still counts), then
one row per example: runs, time alarms (actionable time findings), time-unknown notes, and the
load average when it finished. Several processes, one per example (``--examples NAME``), each
beside its own neighbour, load the machine further and finish sooner.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.run import load_pipeline
from calibration.examples import EXAMPLES
from runtime.kinds import FindingKind, Quantity
from tests.calibration.examples.neighbour import busy_neighbour


def one(name: str) -> tuple[list[str], int]:
    """(the time alarms as kind and stage, the time-unknown notes) of one calibration of example
    ``name`` under load."""
    example = EXAMPLES[name]
    pipeline = load_pipeline(ROOT / "formulas" / example.formula_file, example.pipeline)
    with busy_neighbour():
        cal = calibrate_pipeline(
            example.build, pipeline, example.shapes, call_kwargs=example.call_kwargs, repeat=3
        )
    timed = [f for f in cal.findings if f.quantity == Quantity.TIME]
    return (
        [f"{f.kind} {f.stage}" for f in timed if f.actionable],
        sum(f.kind == FindingKind.TIME_UNKNOWN for f in timed),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--examples", nargs="*", default=sorted(EXAMPLES))
    args = parser.parse_args()
    print(f"{'example':10} {'runs':>4} {'time alarms':>11} {'time-unknown':>12} {'load':>5}")
    for name in args.examples:
        alarms = unknown = 0
        for run in range(1, args.runs + 1):
            named, u = one(name)
            alarms, unknown = alarms + len(named), unknown + u
            load1 = os.getloadavg()[0]
            shown = ", ".join(named) or "no alarm"
            print(f"# {name} run {run}: {shown}; {u} time-unknown; load {load1:.1f}", flush=True)
        load = os.getloadavg()[0]
        print(f"{name:10} {args.runs:>4} {alarms:>11} {unknown:>12} {load:>5.1f}", flush=True)


if __name__ == "__main__":
    main()
