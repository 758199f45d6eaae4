"""The process keeps freed memory (calibration.core.heap): a request after a larger one takes no
page faults, which the thread's CPU time would count. The tiny Wan in a fresh process each (the
setting is process-wide and one-way), counted by the minor page faults, never by a clock. Both
processes start from glibc's own starting thresholds, fixed (128 KiB): left adaptive, glibc
sometimes raises them itself before the measured request (CI saw 1 fault without the setting),
so the control would not show what the setting removes."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("diffusers")

#: The tiny Wan's target, then its probe, twice over; print the minor page faults the last probe
#: took (after a larger request, as every round's first size follows the target's verifying run).
SCRIPT = """
import ctypes, ctypes.util, resource, sys, torch
from calibration.calibrate.run import load_pipeline
from calibration.core.heap import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, keep_freed_memory
from calibration.core.session import Session
from calibration.examples import EXAMPLES
from tests.calibration.lifecycle_setup import FORMULAS
libc = ctypes.CDLL(ctypes.util.find_library("c"))
assert libc.mallopt(M_MMAP_THRESHOLD, 128 << 10) and libc.mallopt(M_TRIM_THRESHOLD, 128 << 10)
if sys.argv[1] == "kept":
    assert keep_freed_memory()
torch.set_num_threads(1)
example = EXAMPLES["wan"]
pipeline = load_pipeline(FORMULAS / example.formula_file, example.pipeline)
session = Session(example.build(0), pipeline, "cpu", call_kwargs=example.call_kwargs)
target = dict(steps=2, frames=9, height=64, width=64, cfg=True)
probe = dict(steps=2, frames=9, height=32, width=32, cfg=False)
for point in (target, probe, target):
    session.run(point)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
session.run(probe)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_request_after_a_larger_one_takes_no_page_faults():
    assert faults("default") > 500  # glibc gave the larger request's blocks back
    assert faults("kept") < 100
