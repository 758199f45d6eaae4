"""A busy neighbour: a process spinning a CPU core while a calibration runs (the test and
bench/time_load.py start it and kill it by its own handle)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

SPIN = "while True:\n    pass\n"


@contextmanager
def busy_neighbour() -> Iterator[subprocess.Popen[bytes]]:
    """One process spinning a core for as long as the block runs, killed at its end."""
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        yield spinner
    finally:
        spinner.kill()
        spinner.wait()
