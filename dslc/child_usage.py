"""A `dslc` command in a fresh process and what it used, as a user's run would: its exit status,
CPU seconds and peak RSS. For the cost tests and `bench/compile.py` (issue 23's budgets).

The peak is the process's own `VmHWM` since `exec` (Linux `/proc`), written at exit: `ru_maxrss`
of a child would include the size of the (large) process that forked it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from attrs import frozen

__all__ = ["Usage", "run_dslc"]

_CHILD = """
import atexit, os
def hwm():
    with open("/proc/self/status") as status:
        kb = next(line.split()[1] for line in status if line.startswith("VmHWM"))
    with open(os.environ["DSLC_HWM_OUT"], "w") as out:
        out.write(kb)
atexit.register(hwm)
from dslc.cli import main
main()
"""


@frozen
class Usage:
    """What one command used: exit status, CPU seconds (user + system), peak RSS in MiB."""

    code: int
    cpu_s: float
    peak_mib: float


def run_dslc(args: list[str], cwd: str | Path | None = None) -> Usage:
    """Run `dslc ARGS` with this interpreter, this checkout first on the path; output discarded."""
    root = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "hwm"
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, *args],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": path, "DSLC_HWM_OUT": str(out)},
        )
        _, status, usage = os.wait4(child.pid, 0)  # this child's own CPU time
        child.returncode = os.waitstatus_to_exitcode(status)
        peak = int(out.read_text()) / 1024 if out.exists() else float("nan")
    return Usage(child.returncode, usage.ru_utime + usage.ru_stime, peak)
