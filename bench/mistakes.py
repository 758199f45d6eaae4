"""Seeded formula mistakes: is calibration ever silent on a wrong formula? (issue 18)

    .venv/bin/python bench/mistakes.py [--only NAME[,NAME...]] [--repeat N] [--json FILE]

For each mistake of ``calibration.examples.mistakes.catalogue.MISTAKES`` (one exact edit of a real
formula file: a wrong VAE compression factor, a missing CFG doubling, a missing term, a constant
where the stage grows, a wrong iteration count, a wrong `call` argument, a stage on the wrong
component, a wrong probe minimum): compile the edited formulas in memory, run the real calibration
with ``verify`` (``calibration.calibrate.pipeline.calibrate_pipeline``, random-weight tiny pipelines
on the CPU), and print the stages that miss at the target (memory: raw error beyond +-5 % or a bound
under the measured peak; time, for mistakes about time: beyond +-5 % and the estimate's two sigma),
the findings (actionable ones marked ``!``) and whether every missing stage is named by an
actionable finding, or the calibration refused to run naming the bad fact. A mistake about time
that the run's time noise cannot judge (no size off its fit on clean, replicated evidence: a loaded
machine, issue 41 item 4) is ``unjudged``, with each size's residual and noise. Closes with ``N
caught of M``; the exit status is 1 when a mistake is neither caught nor unjudged.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.accuracy import machine
from calibration.examples.mistakes.catalogue import BY_NAME, MISTAKES
from calibration.examples.mistakes.model import Miss, Mistake, Outcome
from calibration.examples.mistakes.run import run_mistake


def _miss(m: Miss) -> str:
    if m.measured is None:
        return f"{m.stage} ({m.why})"
    bound = "" if m.bound is None else f", bound {m.bound:.0f} vs {m.measured:.0f}"
    unit = " B" if m.quantity == "memory" else " ms"
    return f"{m.label} {m.quantity} {m.why} (predicted {m.predicted:.6g}{unit}{bound})"


def row(mistake: Mistake, outcome: Outcome, seconds: float) -> list[str]:
    """mistake, family, stages missing, findings, caught."""
    missing = "; ".join(_miss(m) for m in outcome.misses) or "-"
    if outcome.refused is not None:
        findings = "refused: " + outcome.refused.splitlines()[0][:120]
    else:
        findings = (
            ", ".join(
                f"{'!' if f.actionable else ''}{f.kind} {f.stage} {f.quantity}"
                + (f" ({f.direction})" if f.direction else "")
                for f in outcome.findings
            )
            or "none"
        )
    verdict = "harmless" if outcome.harmless else ("yes" if outcome.caught else "NO")
    if verdict != "yes" and outcome.unjudged is not None:
        verdict = f"unjudged: time noise ({outcome.unjudged})"
    return [f"{mistake.name} ({mistake.kind})", mistake.family, missing, findings, verdict]


def table(rows: Sequence[Sequence[str]]) -> str:
    head = ["mistake", "family", "stages missing", "findings (! actionable)", "caught"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in r) + " |" for r in rows]
    return "\n".join(lines)


def as_json(mistake: Mistake, outcome: Outcome, seconds: float) -> dict[str, Any]:
    import attrs

    return {
        "mistake": mistake.name,
        "kind": mistake.kind,
        "family": mistake.family,
        "why": mistake.why,
        "expected_stages": list(mistake.stages),
        "expected_direction": mistake.direction,
        "caught": outcome.caught,
        "harmless": outcome.harmless,
        "missing": list(outcome.missing),
        "named": list(outcome.named),
        "misses": [attrs.asdict(m) for m in outcome.misses],
        "noise": [attrs.asdict(m) for m in outcome.noise],
        "findings": [attrs.asdict(f) for f in outcome.findings],
        "refused": outcome.refused,
        "unjudged": outcome.unjudged,
        "errors": list(outcome.errors),
        "seconds": round(seconds, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help=f"comma-separated, from {', '.join(BY_NAME)}")
    parser.add_argument(
        "--repeat", type=int, help="rounds per calibration (default: the mistake's own, 1 or 3)"
    )
    parser.add_argument("--json", type=Path, help="also write every outcome to this file")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BY_NAME)
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown mistakes {unknown}; known: {', '.join(BY_NAME)}")
    chosen = [m for m in MISTAKES if m.name in names]
    rows, records = [], []
    for mistake in chosen:
        start = time.monotonic()
        outcome, _ = run_mistake(mistake, repeat=args.repeat)
        seconds = time.monotonic() - start
        rows.append(row(mistake, outcome, seconds))
        records.append(as_json(mistake, outcome, seconds))
        print(f"{mistake.name}: {rows[-1][-1]} ({seconds:.0f} s)", file=sys.stderr, flush=True)
    print(table(rows), end="\n\n")
    caught = sum(r["caught"] for r in records)
    unjudged = sum(not r["caught"] and r["unjudged"] is not None for r in records)
    print(f"{caught} caught of {len(records)}" + (f", {unjudged} unjudged" if unjudged else ""))
    print(f"Machine: {machine()}")
    if args.json:
        args.json.write_text(json.dumps(records, indent=1, default=str) + "\n")
    return 0 if caught + unjudged == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
