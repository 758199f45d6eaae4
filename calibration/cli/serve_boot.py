"""`dslc serve`'s worker factory: build the chosen pipeline as `dslc plan --validate` does, start it
warm or cold (``warm.start``), and hand back the worker that admits every request on the validated
placement."""

from __future__ import annotations

import contextlib
from pathlib import Path

import attrs
from attrs import frozen

from calibration.cli.options import Choice
from calibration.core.config import RunConfig
from calibration.core.shapes import Shapes
from calibration.plan.model import Device, PlanInputError
from calibration.serve.admitted import AdmittedWorker
from calibration.serve.state import StateFolder, formulas_digest
from calibration.serve.worker import NotServing

#: What to do when a phase has no estimate (its reason precedes this in the message).
UNPLANNED_FIX = (
    "see every phase with `dslc calibrate` and the same options, then give a smaller --target "
    "or --calibrate-offload group"
)


@frozen
class Boot:
    """What `dslc serve` was told: the pipeline, its shapes, the run, the device, the state."""

    choice: Choice
    shapes: Shapes
    config: RunConfig
    device: Device
    state: Path | None = None


def formula_files(path: Path) -> list[Path]:
    """The formula files a fingerprint hashes: the file, or every ``*.wf`` below the folder."""
    return sorted(path.rglob("*.wf")) if path.is_dir() else [path]


def boot(given: Boot) -> AdmittedWorker:
    """The lifecycle on a fresh pipeline (warm when the state folder matches), then the worker."""
    from calibration.calibrate.run import shapes as full_shapes
    from calibration.cli.validate import built_choice
    from calibration.core.host import quiet_libraries, resolve_device, torch_threads
    from calibration.core.session import Session
    from calibration.lifecycle.steps import Settings
    from calibration.serve.warm import fingerprint_of, start

    config = given.config.placed()
    built = built_choice(given.choice, given.shapes)
    points = full_shapes(
        built.formulas,
        built.defaults,
        target=given.shapes.target,
        probe=given.shapes.probe,
        warmup=given.shapes.warmup,
    )
    config = attrs.evolve(config, device=resolve_device(config.device))
    stack = contextlib.ExitStack()
    with stack:
        stack.enter_context(quiet_libraries())
        stack.enter_context(torch_threads(config.device, config.threads))
        session = Session.open(
            built.build(config.seed),  # type: ignore[arg-type]  # checked by pipeline_facts
            built.formulas,
            config,
            call_kwargs=built.call_kwargs,
        )
        digest = formulas_digest(formula_files(given.choice.formulas_path), built.formulas.name)
        state = StateFolder(given.state) if given.state is not None else None
        fingerprint = fingerprint_of(session, digest, given.device.capacity_bytes)
        settings = Settings(given.device, "apply", margin=config.margin, repeat=config.repeat)
        try:
            started = start(session, points, settings, state, fingerprint)
        except PlanInputError as exc:  # a phase the calibration could not estimate: said once
            raise NotServing(f"the worker cannot serve: {exc}; {UNPLANNED_FIX}") from None
        worker = AdmittedWorker(session, started, points.target, state, given.device)
        worker.on_close = stack.pop_all().close  # the libraries' settings kept while it serves
    return worker
