"""Fuzzing the lifecycle (`dslc plan --validate`): faults at random steps, on random ranks, with
random clocks, bounded by wall time or a case count.

    nice -n 19 .venv/bin/python bench/lifecycle_fuzz.py --minutes 30 --seed 1
    .venv/bin/python bench/lifecycle_fuzz.py --cases 20 --seed 3

Each case (``calibration.fuzzing.lifecycle.draw``) runs the lifecycle on a fresh tiny FLUX or
SDXL with one fault: on one rank, in a long-lived worker process (its calibrations measured once);
on two gloo ranks, in two fresh processes; or (one case in ``CLI_EVERY``) through `dslc plan
--validate` in a subprocess, the fault built into a ``--pipeline`` factory (a component whose
``.to()`` fails). Each case has a hang guard by progress (``calibration.fuzzing.lifecycle_guard``):
every rank beats at each memory counter read, and a rank silent for longer than six rank timeouts
(120 s; a fresh process's first beat: 600 s) hangs, however loaded the machine (a loaded machine
slows the beats, a blocked rank stops them); a `dslc plan --validate` case, and any case that
keeps beating, is bounded by ``CAP_S`` in all. A case counts as

- a hang: a rank made no progress within the guard (the processes are killed; its replay command
  is printed);
- exit 3: the command exited 3 or printed a traceback, or an exception other than the injected
  interrupt escaped ``run_lifecycle``;
- states differing: the ranks ended on different statuses, serving or placements (an interrupted
  rank: the others do not serve);
- not restored: a component not as it was (hooks, forward overrides, tensors' devices and dtypes)
  after a failed run or once the served plan is undone, other than those a failed rollback
  reports left in place.

Progress goes to stdout a line a case (flushed: piped too); the table at the end counts cases,
hangs, exit 3, states differing and pipelines not restored by fault kind. Exit 0 only when every
count but the cases is 0 (``lifecycle_guard.verdict``), else 1.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration.fuzzing import lifecycle as fuzz
from calibration.fuzzing import lifecycle_checks as checks
from calibration.fuzzing import lifecycle_guard as guard

FORMULAS = str(ROOT / "formulas")
#: How long a rank may make no progress (seconds): six rank timeouts.
SILENCE_S = guard.silence_s(fuzz.RANK_TIMEOUT_S)
POLL_S = 1.0  # how often the guard looks at the beats
CLI_EVERY = 8  # one single-rank case in eight runs through `dslc plan --validate`
COLUMNS = ("cases", *guard.FINDINGS)
#: What a case gives back: each rank's result, or None and why it hangs.
Ended = tuple[list[dict] | None, str]


def worker_loop(conn: Connection, beats: guard.Shared) -> None:
    """A long-lived single-rank worker: a case in, this rank's result out; beats counted."""
    beat = guard.beater(beats)
    while True:
        case = conn.recv()
        if case is None:
            return
        conn.send([fuzz.run_rank(fuzz.Case(**case), FORMULAS, beat=beat)])


class Worker:
    """The single-rank worker process, restarted after a hang."""

    def __init__(self) -> None:
        self.process: mp.process.BaseProcess | None = None
        self.conn: Connection | None = None
        self.beats: guard.Shared | None = None

    def run(self, case: fuzz.Case) -> Ended:
        """The case's result, or None and why when a rank stopped progressing (the worker is
        killed)."""
        fresh = self.process is None or not self.process.is_alive()
        if fresh:
            ctx = mp.get_context("spawn")
            self.conn, child = ctx.Pipe()
            self.beats = ctx.Value("q", 0, lock=False)
            self.process = ctx.Process(target=worker_loop, args=(child, self.beats), daemon=True)
            self.process.start()
        assert self.conn is not None and self.beats is not None and self.process is not None
        watch = guard.Watch(SILENCE_S, [self.beats.value], [fresh])
        self.conn.send(fuzz.as_dict(case))
        while not self.conn.poll(POLL_S):
            why = watch.hung([self.beats.value])
            if why:
                self.kill()
                return None, why
        try:
            return self.conn.recv(), ""
        except EOFError:  # the worker died: a crash, not a hang
            self.process.join()
            return [{"escaped": f"worker died, exit {self.process.exitcode}"}], ""

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()
            self.process = None

    def close(self) -> None:
        if self.process is not None and self.conn is not None:
            self.conn.send(None)
            self.process.join(10)
            self.kill()


def ranks_run(case: fuzz.Case) -> Ended:
    """The case on two gloo ranks in fresh processes; None and why when a rank stopped
    progressing."""
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        port = fuzz.free_port()
        beats = [ctx.Value("q", 0, lock=False) for _ in range(case.ranks)]
        procs = [
            ctx.Process(
                target=fuzz.rank_process,
                args=(rank, case.ranks, port, fuzz.as_dict(case), FORMULAS, folder, beats[rank]),
                daemon=True,
            )
            for rank in range(case.ranks)
        ]
        for p in procs:
            p.start()
        watch = guard.Watch(SILENCE_S, [0] * case.ranks, [True] * case.ranks)
        why = ""
        while not why and any(p.is_alive() for p in procs):
            for p in procs:
                p.join(POLL_S / len(procs))
            why = watch.hung([b.value if p.is_alive() else None for b, p in zip(beats, procs)])
        if why:
            for p in procs:
                p.kill()
                p.join()
            return None, why
        out = []
        for rank, p in enumerate(procs):
            path = Path(folder, f"rank{rank}.json")
            died = {"rank": rank, "escaped": f"rank died, exit {p.exitcode}"}
            out.append(json.loads(path.read_text()) if path.exists() else died)
        return out, ""


FACTORY = """
import torch
from calibration.examples import EXAMPLES
from calibration.lifecycle.faults import failing_to

call_kwargs = EXAMPLES[{example!r}].call_kwargs


def build(seed=0):
    pipe = EXAMPLES[{example!r}].build(seed)
    errors = {{"out-of-memory": torch.OutOfMemoryError, "interrupt": KeyboardInterrupt}}
    error = errors.get({kind!r}, RuntimeError)
    modules = {{n: m for n, m in pipe.components.items() if isinstance(m, torch.nn.Module)}}
    failing_to(modules.get({component!r}) or modules[sorted(modules)[0]],
               lambda: error("moving (injected)"), {times})
    return pipe
"""


def cli_run(case: fuzz.Case) -> Ended:
    """The case through `dslc plan --validate` in a subprocess; None and why when it outlived
    ``CAP_S`` (one process, no collective: the cap guards a livelock)."""
    from calibration.examples import EXAMPLES

    probe, target = fuzz.SIZES[case.example]
    shape = lambda point: ",".join(f"{k}={v}" for k, v in point.items())
    args = ["--device-memory", f"{case.capacity}B", "--reserve", "0B", f"--validate={case.mode}"]
    args += ["--target", shape(target), "--probe", shape(probe), "--threads", "1"]
    with tempfile.TemporaryDirectory() as folder:
        chosen = EXAMPLES[case.example]
        if case.step in ("apply", "to"):
            factory = Path(folder, "faulty.py")
            fields = fuzz.as_dict(case) | {"times": case.times or 1}
            factory.write_text(FACTORY.format(**fields))
            args += ["--pipeline", f"{factory}:build", "--name", chosen.pipeline]
            args += ["--formulas", str(Path(FORMULAS, chosen.formula_file))]
        else:
            args += ["--example", case.example]
        command = [sys.executable, "-c", "from dslc.cli import main; main()", "plan", *args]
        try:
            done = subprocess.run(
                command,
                check=False,
                capture_output=True,
                text=True,
                timeout=guard.CAP_S,
                cwd=ROOT,
            )
        except subprocess.TimeoutExpired:
            return None, f"no end within {guard.CAP_S:.0f} s"
    text = done.stdout + done.stderr
    result: dict[str, object] = {"rank": 0, "exit": done.returncode, "changed": []}
    if done.returncode == 3 or "Traceback" in text:
        result["escaped"] = f"exit {done.returncode}: {text[-2000:]}"
    return [result], ""


def judge(case: fuzz.Case, ranks: list[dict] | None) -> list[str]:
    """What the case found: a subset of ``COLUMNS[1:]``."""
    if ranks is None:
        return ["hangs"]
    found = []
    if any("escaped" in r for r in ranks):
        found.append("exit 3")
    if checks.differing(ranks):
        found.append("states differing")
    if any(checks.not_restored(r) for r in ranks):
        found.append("not restored")
    return found


def run_case(case: fuzz.Case, cli: bool, worker: Worker) -> Ended:
    if case.ranks > 1:
        return ranks_run(case)
    if cli:
        return cli_run(case)
    return worker.run(case)


def table(counts: dict[str, Counter[str]], write: Callable[[str], None]) -> None:
    """The summary: each column by fault kind, and the totals."""
    total: Counter[str] = Counter()
    write(f"| fault | {' | '.join(COLUMNS)} |")
    write("|---" * (len(COLUMNS) + 1) + "|")
    for label in sorted(counts):
        total.update(counts[label])
        write(f"| {label} | " + " | ".join(str(counts[label][c]) for c in COLUMNS) + " |")
    write("| **all** | " + " | ".join(str(total[c]) for c in COLUMNS) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="wall time to run (default 5)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=None, help="stop after this many cases")
    parser.add_argument("--first", type=int, default=0, help="the first case's index (replay)")
    args = parser.parse_args(argv)
    print(
        f"lifecycle fuzz: seed {args.seed}, {platform.node()}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.1f}",
        flush=True,
    )
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    end = time.monotonic() + args.minutes * 60
    worker, index = Worker(), args.first
    try:
        while time.monotonic() < end and (args.cases is None or index - args.first < args.cases):
            case = fuzz.draw(args.seed, index)
            cli = random.Random(f"cli:{args.seed}:{index}").randrange(CLI_EVERY) == 0
            label = ("cli " if cli and case.ranks == 1 else "") + case.label
            started = time.monotonic()
            ranks, hang = run_case(case, cli, worker)
            found = judge(case, ranks)
            counts[label].update(["cases", *found])
            shown = f"  FOUND {', '.join(found)}" if found else ""
            print(
                f"case {index} [{time.monotonic() - started:.0f} s] {label} "
                f"{fuzz.as_dict(case)}: {checks.summary(ranks)}{shown}",
                flush=True,
            )
            for r in ranks or ():
                if found and "escaped" in r:
                    print(r["escaped"], flush=True)
            if found:
                why = f"{hang}; " if hang else ""
                print(f"  {why}replay: {guard.replay(args.seed, index)}", flush=True)
            index += 1
    finally:
        worker.close()
    print(f"load at the end {os.getloadavg()[0]:.1f}", flush=True)
    table(counts, lambda line: print(line, flush=True))
    return guard.verdict(counts)


if __name__ == "__main__":
    sys.exit(main())
