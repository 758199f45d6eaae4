"""`dslc serve`'s boot when the calibration cannot estimate a phase: one typed error naming the
phase, the estimator's reason and the fix (the app logs it once and /healthz says it), never a
bare planner error."""

from __future__ import annotations

import attrs
import pytest

from calibration.cli.serve_boot import UNPLANNED_FIX, boot
from calibration.serve.worker import NotServing
from tests.calibration.serve.serving_setup import BOOT


def test_a_calibration_capped_below_the_target_says_why_the_worker_cannot_serve():
    # capped at 1 MiB, ``auto`` calibrates under model offload, which cannot hold the target
    capped = attrs.evolve(BOOT, config=attrs.evolve(BOOT.config, capacity=1 << 20))
    with pytest.raises(NotServing) as caught:
        boot(capped)
    message = str(caught.value)
    assert message.startswith("the worker cannot serve: phase 'component:text_encoder@")
    assert "has no estimate (a probe at or below the target failed" in message
    assert message.endswith(UNPLANNED_FIX) and "\n" not in message
