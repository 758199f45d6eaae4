"""The process keeps the memory its requests free, so a request's CPU time holds no page faults.

glibc hands a freed block of 128 KiB or more back to the kernel (its own mapping, or the heap's
top trimmed), so the next request that needs it faults every page in again: on the tiny Wan, the
first size after the target's verifying run took 5,000 to 15,000 minor faults and 4 to 20 ms of
kernel time in its decode (the thread's CPU time counts both), while a size run right after its
twin took none (bench/README.md, issue 41). That is a slow run in the same place every round, so
its median carries it: a size reads slower than its twin at the same work, and a time check calls
that a wrong formula. Blocks up to glibc's largest mapping threshold (32 MiB) are kept in the
heap once taken and the heap is never trimmed: after the first round every request reuses pages
already there. A process-wide, one-way setting (glibc has no way back to its adaptive
threshold): the process's resident memory stays at its largest request's until it ends. Elsewhere
than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: mallopt's parameters (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: glibc's largest accepted mapping threshold on 64-bit (``DEFAULT_MMAP_THRESHOLD_MAX``).
MMAP_THRESHOLD_MAX = 32 << 20
#: Never trim the heap's top (the largest value mallopt's int takes).
NEVER_TRIM = 2**31 - 1


def keep_freed_memory() -> bool:
    """Keep freed blocks in the process (see the module docstring); whether the C library took
    it (False: not glibc)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(
        mallopt(M_TRIM_THRESHOLD, NEVER_TRIM)
    )
