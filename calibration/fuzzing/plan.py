"""Mutation fuzzing of saved plans (`--calibrate-offload plan:FILE`, shared by bench/fuzz.py and
tests/calibration/test_fuzz_cli.py).

The seed is a real plan: `dslc plan --calibration FILE --device-memory 1MiB --json` on the saved
tiny-FLUX calibration (every placement kind: resident, offloaded, layerwise 1/2), mutated as JSON
and as text by ``calibration.fuzzing.mutate.mutate_document``. A case checks two things:

- read in this process (``calibration.plan.saved.read_plan``) and matched against the pipeline the
  plan was made for (``check_pipeline`` with the seed's own layer counts), only a ``PlanFileError``
  may come out;
- `dslc calibrate --calibrate-offload plan:FILE`, which reads the file before anything is built
  (the run stops where the pipeline would be built), ends with a typed exit, never 3;

each within ``CASE_SECONDS`` of CPU time.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Mapping
from pathlib import Path

from artifact.write import JsonObject
from calibration.fuzzing.mutate import CASE_SECONDS, Failure, Sandbox, calibrate_options, run_dslc
from dslc.fuzzing.harness import CaseClock

#: The capacity the seed plan is made for: the tiny FLUX streams one of its transformer's blocks.
SEED_CAPACITY = "1MiB"


def real_plan(calibration: str | Path) -> JsonObject:
    """The seed: what `dslc plan --json` writes for the saved ``calibration`` at 1 MiB."""
    from click.testing import CliRunner

    from dslc.cli import cli

    args = ["plan", "--calibration", str(calibration), "--device-memory", SEED_CAPACITY]
    result = CliRunner().invoke(cli, [*args, "--reserve", "0", "--json"])
    if result.exit_code != 0:
        raise RuntimeError(f"dslc plan exited {result.exit_code}: {result.output[-300:]}")
    doc: JsonObject = json.loads(result.stdout)
    return doc


def layers_of(doc: JsonObject) -> dict[str, int]:
    """The pipeline a plan was made for, as ``check_pipeline`` takes it: each component's layers."""
    components = doc["components"]
    return {
        c["name"]: c["layers"]
        for c in (components if isinstance(components, list) else [])
        if isinstance(c, dict) and isinstance(c["name"], str) and isinstance(c["layers"], int)
    }


def check_plan_file(
    text: str,
    mutation: str,
    sandbox: Sandbox,
    layers: Mapping[str, int],
    formulas: str,
    seconds: float | None = CASE_SECONDS,
) -> float:
    """One mutated plan file read, matched and given to `dslc calibrate` (see the module
    docstring); the CPU seconds taken, or ``calibration.fuzzing.mutate.Failure`` (past ``seconds``
    of CPU time too; None: no limit)."""
    from calibration.plan.saved import PlanFileError, check_pipeline, read_plan

    path = sandbox.root / "plan.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    clock = CaseClock()
    try:
        check_pipeline(read_plan(path), layers)
    except PlanFileError:
        pass
    except Exception as exc:  # anything else is a traceback a user would see: our bug
        where = traceback.format_exception(exc)[-2].strip().splitlines()[0]
        raise Failure("plan", mutation, f"{type(exc).__name__}: {exc} ({where})", text) from exc
    if (overrun := clock.overrun(seconds)) is not None:
        raise Failure("plan", mutation, overrun, text)
    args = [*calibrate_options(sandbox, formulas), "--calibrate-offload", f"plan:{path}"]
    return clock.elapsed()[0] + run_dslc(args, "plan", mutation, seconds)
