"""How a calibration runs, as one frozen value: the command line builds it once (``run_options``,
``--device``), ``calibrate_pipeline`` from its keywords, and ``Session.open`` builds the session
from it."""

from __future__ import annotations

import attrs
from attrs import frozen

from calibration.core.offload import Placing, placing
from calibration.probes.time_probe import TIME_TOLERANCE
from runtime.estimate.results import DEFAULT_MARGIN


@frozen
class RunConfig:
    """Where and how the pipeline runs and is measured; the placement as given until ``placed``."""

    device: str = "auto"  # auto, cpu, cuda or cuda:N (``calibration.core.host.resolve_device``)
    margin: float = DEFAULT_MARGIN
    repeat: int = 3
    clock: str = "auto"
    seed: int = 0
    threads: int | None = 1
    time_tolerance: float | None = TIME_TOLERANCE  # None: never probe a size for time alone
    # --calibrate-offload as given (``plan:FILE`` read by ``placed``); None: the one in force
    # (``calibration.core.offload.calibrating_under``)
    offload: str | Placing | None = "auto"
    capacity: int | None = None  # --device-capacity

    def placing(self) -> Placing | None:
        """The placement, a plan file read (``PlanFileError``) when it is still a name."""
        return placing(self.offload) if isinstance(self.offload, str) else self.offload

    def placed(self) -> RunConfig:
        """The configuration with its plan file read now: before anything is built."""
        return attrs.evolve(self, offload=self.placing())
