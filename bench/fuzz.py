"""Long mutation-fuzzing run of the compiler, the artifact loader, `dslc plan`'s calibration
documents and `dslc calibrate` / `dslc plan` option lists, bounded by wall time.

    .venv/bin/python bench/fuzz.py --seconds 60
    .venv/bin/python bench/fuzz.py --kinds calibration,options --seconds 600
    nice -n 10 .venv/bin/python bench/fuzz.py --kinds infer --seconds 1800

Sources (the real `formulas/*.wf` and `dslc.testing.sources()` examples) are mutated token-wise
(`dslc.fuzzing.sources.SOURCE_MUTATORS`) and compiled with `dslc.compiler.compile_text`; the
artifact of `formulas/` is mutated (`dslc.fuzzing.artifacts.ARTIFACT_MUTATORS`, plus JSON-text
mutations) and loaded with `runtime.load_formulas`. One case in ten of each is a cost bomb instead
(`dslc.bombs`: nested powers, squaring chains, let and contract fan-out, extends chains, blank
floods, many pipelines or params), at a random size. A case fails when anything but a
CompileResult / a FormulaError comes out, or when it takes over `dslc.fuzzing.harness.CASE_SECONDS`
of CPU time (`dslc.fuzzing.harness.CaseClock`: the same on a loaded machine; wall time only guards
against hangs). The summary gives the case count,
failures and slowest case per kind, and the process's peak RSS (an upper bound on any one case's
memory) with the case that raised it most. Failures are printed with the seed and case number that
reproduce them (`--replay KIND CASE`); the exit status is 1 when any case failed.

`--kinds calibration,options` (`calibration.fuzzing.mutate`): the real saved calibration
`tests/calibration/data/flux_calibration.json` mutated as JSON and as text and planned with
`dslc plan --calibration FILE`; the option lists of `dslc calibrate` and `dslc plan` (from a saved
calibration, or running one that stops where the pipeline is built) mutated with hostile values
and paths (a FIFO, `/dev/zero`, a link to `/dev/null`, an unknown figure format). A case fails on
exit 3, an escaping exception, over `CASE_SECONDS`, or a rise of the process's peak RSS over
`CASE_BYTES`.

`--kinds plan` (`calibration.fuzzing.plan`): a real saved plan (`dslc plan --json` of that
calibration at 1 MiB: resident, offloaded and layerwise components) mutated the same ways, read
back and matched against its pipeline (only a `PlanFileError` may come out) and given to `dslc
calibrate --calibrate-offload plan:FILE` (a typed exit, never 3).

`--kinds infer` (`calibration.fuzzing.infer`): `dslc infer` command lines of random skeletons
(written to a file and mutated as text) or `--axis` texts, bases of declared, unknown or hostile
values, hostile options and paths, and a factory: most stop where the pipeline would be built
(`STOP_SECONDS` a case), one in `RUN_EVERY` runs a toy pipeline of two linear modules (or one that
raises at some sizes, exits the interpreter, has no modules, or is no pipeline) through the whole
inference (`RUN_SECONDS` a case).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import random
import resource
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration.fuzzing import infer as fuzzing_infer
from calibration.fuzzing import mutate as cal_fuzzing
from calibration.fuzzing import plan as fuzzing_plan
from dslc import bombs
from dslc.fuzzing import artifacts as artifact_fuzz
from dslc.fuzzing import harness
from dslc.fuzzing import sources as source_fuzz

BOMB_EVERY = 10  # one case in ten of each kind is a cost bomb (dslc.bombs) instead of a mutation

KINDS = ("source", "artifact", "calibration", "options", "infer", "plan")
DEFAULT_KINDS = "source,artifact"
CASE_BYTES = 256 << 20  # a case raising the process's peak RSS by more than this is a failure
CALIBRATION = ROOT / "tests" / "calibration" / "data" / "flux_calibration.json"
SD_FORMULAS = str(ROOT / "tests" / "calibration" / "data" / "custom_sd.wf")
OPTION_COMMANDS = ("calibrate", "plan-saved", "plan-run")


def corpus(generated: int, seed: int) -> list[str]:
    """The real formula files and `generated` examples of `dslc.testing.sources()`."""
    texts = source_fuzz.real_sources(str(ROOT / "formulas"))
    if generated:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st

        from dslc.testing import sources

        @settings(
            max_examples=generated,
            database=None,
            derandomize=True,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(sources(), st.just(seed))
        def collect(text: str, _: int) -> None:
            texts.append(text)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            collect()
    return texts


def case(kind: str, seed: int, index: int, texts: list[str], doc: str) -> tuple[str, object]:
    """The mutation name and payload of case `index` of `kind` (deterministic in seed and index)."""
    rng = random.Random(f"{seed}:{kind}:{index}")
    if kind in ("calibration", "options"):
        return _calibration_case(kind, rng, index)
    if kind == "infer":
        return fuzzing_infer.infer_case(rng, index, _sandbox())
    if kind == "plan":
        return cal_fuzzing.mutate_document(rng, _seed_plan())
    bomb = index % BOMB_EVERY == BOMB_EVERY - 1
    if kind == "source":
        if bomb:
            family, text = bombs.source_bomb(rng)
            return f"bomb:{family}", text
        return source_fuzz.mutate_source(rng, rng.choice(texts))
    if bomb:
        family, document = bombs.artifact_bomb(rng)
        return f"bomb:{family}", document
    return artifact_fuzz.mutate_artifact(rng, doc)


_SANDBOX: list[cal_fuzzing.Sandbox] = []
_PLAN: list[dict[str, object]] = []


def _seed_plan() -> dict[str, object]:
    """The real plan the plan kind mutates (calibration.fuzzing.plan.real_plan), made once."""
    if not _PLAN:
        _PLAN.append(fuzzing_plan.real_plan(CALIBRATION))
    return _PLAN[0]


def _sandbox() -> cal_fuzzing.Sandbox:
    """The folder of hostile paths (calibration.fuzzing.mutate.Sandbox), made once per run."""
    if not _SANDBOX:
        import tempfile

        _SANDBOX.append(cal_fuzzing.Sandbox(Path(tempfile.mkdtemp(prefix="dslc-fuzz-"))))
    return _SANDBOX[0]


def _calibration_case(kind: str, rng: random.Random, index: int) -> tuple[str, object]:
    """A mutated calibration document (text), or a mutated option list of calibrate or plan."""
    real = json.loads(CALIBRATION.read_text())
    sandbox = _sandbox()
    if kind == "calibration":
        return cal_fuzzing.mutate_document(rng, real)
    command = OPTION_COMMANDS[index % len(OPTION_COMMANDS)]
    if command == "calibrate":
        base = cal_fuzzing.calibrate_options(sandbox, SD_FORMULAS)
    else:
        saved = sandbox.root / "saved.json"
        saved.write_text(json.dumps(real))
        document = str(saved) if command == "plan-saved" else None
        base = cal_fuzzing.plan_options(sandbox, document, SD_FORMULAS)
    mutation, args = cal_fuzzing.mutate_options(rng, base, sandbox)
    return f"{command}:{mutation}", args


def check_calibration(payload: object, mutation: str) -> float:
    """`dslc plan --calibration FILE` on a mutated document (harness.Failure on a broken case)."""
    path = _sandbox().root / "doc.json"
    path.write_text(str(payload), encoding="utf-8", errors="surrogatepass")
    args = cal_fuzzing.plan_options(_sandbox(), str(path), SD_FORMULAS)
    return _as_dslc_failure(lambda: cal_fuzzing.run_dslc(args, "calibration", mutation))


def check_options(payload: object, mutation: str) -> float:
    """`dslc ARGS` for a mutated option list (harness.Failure on a broken case)."""
    assert isinstance(payload, list)
    return _as_dslc_failure(lambda: cal_fuzzing.run_dslc(payload, "options", mutation))


def check_plan(payload: object, mutation: str) -> float:
    """A mutated plan file read and given to `dslc calibrate --calibrate-offload plan:FILE`."""
    layers = fuzzing_plan.layers_of(_seed_plan())
    return _as_dslc_failure(
        lambda: fuzzing_plan.check_plan_file(
            str(payload), mutation, _sandbox(), layers, SD_FORMULAS
        )
    )


def check_infer(payload: object, mutation: str) -> float:
    """`dslc infer ARGS` (harness.Failure on a broken case)."""
    assert isinstance(payload, list)
    seconds = fuzzing_infer.case_seconds(payload)
    return _as_dslc_failure(lambda: cal_fuzzing.run_dslc(payload, "infer", mutation, seconds))


def _as_dslc_failure(run: Callable[[], float]) -> float:
    """calibration.fuzzing.mutate.Failure as dslc.fuzzing.harness.Failure: one kind of failure in
    the tally."""
    try:
        return run()
    except cal_fuzzing.Failure as exc:
        raise harness.Failure(exc.kind, exc.mutation, exc.problem, exc.payload) from exc


def _warm_up(kinds: tuple[str, ...], check: dict[str, Check]) -> None:
    """One unmutated case of each calibration kind, untimed: its first run imports torch,
    diffusers and jsonschema (seconds), which no case should be charged with."""
    real = CALIBRATION.read_text()
    for kind in kinds:
        if kind == "calibration":
            check[kind](real, "warm-up")
        elif kind == "plan":  # makes the seed plan, imports the planner and the session's
            seed = _seed_plan()
            layers = fuzzing_plan.layers_of(seed)
            text = json.dumps(seed)
            fuzzing_plan.check_plan_file(
                text, "warm-up", _sandbox(), layers, SD_FORMULAS, seconds=None
            )
        elif kind == "infer":  # imports torch and diffusers, runs the toy once
            sandbox = _sandbox()
            skeleton = sandbox.root / "warm.wf"
            skeleton.write_text(fuzzing_infer.WARM_SKELETON)
            args = ["infer", "--pipeline", "calibration.fuzzing.infer:toy", "--params"]
            cal_fuzzing.run_dslc([*args, str(skeleton)], kind, "warm-up", seconds=None)
        elif kind == "options":
            importlib.import_module("torch")  # `--device-memory cuda:0` imports it (seconds)
            for name in ("calibrate", "plan"):  # `--help` imports each command's module
                cal_fuzzing.run_dslc([name, "--help"], kind, "warm-up", seconds=None)
            sandbox = _sandbox()
            saved = sandbox.root / "saved.json"
            saved.write_text(real)
            bases = [
                cal_fuzzing.calibrate_options(sandbox, SD_FORMULAS),
                cal_fuzzing.plan_options(sandbox, str(saved), SD_FORMULAS),
                cal_fuzzing.plan_options(sandbox, None, SD_FORMULAS),  # imports the session's
            ]
            for base in bases:  # unmutated: each reaches as far as a case can
                cal_fuzzing.run_dslc(base, kind, "warm-up", seconds=None)
    gc.collect()
    gc.freeze()  # the imported libraries' objects: no case pays for a full collection of them


def _peak_rss() -> int:
    """The process's peak resident memory so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="wall-time budget (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--generated", type=int, default=50, help="dslc.testing.sources() examples to seed with"
    )
    parser.add_argument(
        "--replay", nargs=2, metavar=("KIND", "CASE"), help="rerun one case and show its payload"
    )
    parser.add_argument("--max-shown", type=int, default=5, help="failures printed per kind")
    parser.add_argument(
        "--kinds",
        default=DEFAULT_KINDS,
        help=f"comma-separated, of {', '.join(KINDS)} (default {DEFAULT_KINDS})",
    )
    return parser.parse_args(argv)


Check = Callable[..., float]  # check_source or check_artifact: (payload, mutation) -> seconds


@attrs.define
class Tally:
    """What the run found per kind: cases, failures, time, the slowest case, the largest rise of
    the process's peak RSS in one case."""

    seed: int
    max_shown: int
    runs: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(KINDS, 0))
    failures: dict[str, list[str]] = attrs.Factory(lambda: {kind: [] for kind in KINDS})
    slowest: dict[str, tuple[float, str]] = attrs.Factory(lambda: dict.fromkeys(KINDS, (0.0, "")))
    busy: dict[str, float] = attrs.Factory(lambda: dict.fromkeys(KINDS, 0.0))
    grew: dict[str, tuple[int, str]] = attrs.Factory(lambda: dict.fromkeys(KINDS, (0, "")))

    def run(self, kind: str, index: int, mutation: str, payload: object, check: Check) -> None:
        """Run one case and count it; a failure is printed (the first `max_shown` per kind)."""
        peak_before = _peak_rss()
        begin = time.process_time()
        try:
            elapsed = check(payload, mutation)
        except harness.Failure as failure:
            elapsed = time.process_time() - begin  # CPU time, as the checks measure it
            self.failures[kind].append(
                f"{failure} (reproduce: bench/fuzz.py --seed {self.seed} --replay {kind} {index})"
            )
            if len(self.failures[kind]) <= self.max_shown:
                print(f"FAIL {self.failures[kind][-1]}", flush=True)
        self.runs[kind] += 1
        self.busy[kind] += elapsed
        if elapsed > self.slowest[kind][0]:
            self.slowest[kind] = (elapsed, f"#{index} {mutation}")
        rise = _peak_rss() - peak_before
        if rise > CASE_BYTES:
            self.failures[kind].append(
                f"{kind} [{mutation}]: raised the peak RSS by {rise / 2**20:.0f} MiB (reproduce: "
                f"bench/fuzz.py --seed {self.seed} --replay {kind} {index})"
            )
            if len(self.failures[kind]) <= self.max_shown:
                print(f"FAIL {self.failures[kind][-1]}", flush=True)
        if rise > self.grew[kind][0]:
            self.grew[kind] = (rise, f"#{index} {mutation}")


def _replay(args: argparse.Namespace, texts: list[str], doc: str, check: dict[str, Check]) -> int:
    kind, index = args.replay[0], int(args.replay[1])
    mutation, payload = case(kind, args.seed, index, texts, doc)
    print(f"{kind} case {index} ({mutation}); payload:\n{payload!r}"[:4000])
    try:
        print(f"ok in {check[kind](payload, mutation):.4f} s")
    except harness.Failure as failure:
        raise failure.__cause__ or failure
    return 0


def _report(
    args: argparse.Namespace,
    texts: list[str],
    tally: Tally,
    total: float,
    kinds: tuple[str, ...] = KINDS,
) -> None:
    """The machine, a table per kind, peak memory and each distinct failure."""
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, CPython "
        f"{platform.python_version()}; "
        f"{args.seconds:g} s budget, seed {args.seed}, corpus {len(texts)} sources "
        f"({len(texts) - args.generated} real + {args.generated} generated)"
    )
    head = f"{'kind':<10}{'cases':>8}{'failures':>10}{'slowest CPU':>15}  {'cases/s':>8}"
    print(f"{head}  slowest case")
    runs, failures, slowest, busy = tally.runs, tally.failures, tally.slowest, tally.busy
    for kind in kinds:
        rate = runs[kind] / busy[kind] if busy[kind] else 0.0  # cases per CPU second
        print(
            f"{kind:<10}{runs[kind]:>8}{len(failures[kind]):>10}"
            f"{slowest[kind][0] * 1e3:>13.1f} ms  {rate:>8.0f}  {slowest[kind][1]}"
        )
    count = sum(runs.values())
    print(
        f"{'all':<10}{count:>8}{sum(map(len, failures.values())):>10}{'':>15}  "
        f"{count / total:>8.0f}  "
        f"(wall {total:.1f} s)"
    )
    print(
        f"peak memory: {_peak_rss() / 2**20:.0f} MiB RSS for the whole run (corpus and artifact "
        f"included; no case can use more)"
    )
    for kind in kinds:
        print(
            f"{kind:<10}largest rise of the peak in one case: {tally.grew[kind][0] / 2**20:.1f} "
            f"MiB ({tally.grew[kind][1] or 'none'})"
        )
    distinct: dict[str, int] = {}
    for kind in kinds:
        for line in failures[kind]:
            key = line.split("]: ", 1)[-1].split(" (reproduce")[0][:100]
            distinct[f"{kind}: {key}"] = distinct.get(f"{kind}: {key}", 0) + 1
    for key, count in distinct.items():
        print(f"distinct failure x{count}: {key}")


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    texts = corpus(args.generated, args.seed)
    # each case parses a fresh copy
    doc = json.dumps(artifact_fuzz.real_artifact(str(ROOT / "formulas")))
    check: dict[str, Check] = {
        "source": harness.check_source,
        "artifact": harness.check_artifact,
        "calibration": check_calibration,
        "options": check_options,
        "infer": check_infer,
        "plan": check_plan,
    }
    kinds = tuple(k for k in KINDS if k in args.kinds.split(","))
    if not kinds or set(args.kinds.split(",")) - set(KINDS):
        print(f"--kinds: choose among {', '.join(KINDS)}", file=sys.stderr)
        return 2
    if args.replay:
        return _replay(args, texts, doc, check)
    tally = Tally(args.seed, args.max_shown)
    _warm_up(kinds, check)
    start = time.perf_counter()
    deadline = start + args.seconds
    index = 0
    while time.perf_counter() < deadline:
        for kind in kinds:
            mutation, payload = case(kind, args.seed, index, texts, doc)
            tally.run(kind, index, mutation, payload, check[kind])
        index += 1
    _report(args, texts, tally, time.perf_counter() - start, kinds)
    return 1 if any(tally.failures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
