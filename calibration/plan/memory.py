"""Device memory figures the warmup and the planner share: one GiB, the allocator's margin.

Pure: no torch. The warmup keeps the margin free when it picks a probe; the planner keeps it as a
device's default reserve (``calibration.plan.model.Device``).
"""

from __future__ import annotations

GiB = 1 << 30


def allocator_margin(total_bytes: int) -> int:
    """Room left for allocator fragmentation and workspaces: max(1 GiB, 2 % of the device)."""
    return max(GiB, -(-total_bytes * 2 // 100))
