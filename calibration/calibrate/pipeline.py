"""Building the pipeline and calibrating it: ``calibrate_pipeline`` for Python callers (its keywords
make the ``RunConfig``), ``calibrate_configured`` for the commands (`dslc calibrate`, `dslc plan`),
which build their ``RunConfig`` once; the session comes from ``Session.open``, its placement taken
off afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs
from attrs import frozen

from artifact.point import Point
from calibration.calibrate.loop import Progress
from calibration.calibrate.run import Calibration, UndoFailed, calibrate_session, shapes
from calibration.core.config import RunConfig
from calibration.core.heap import keep_freed_memory
from calibration.core.host import quiet_libraries, torch_threads
from calibration.core.offload import Placing
from calibration.core.session import Session
from calibration.core.shapes import Shapes
from calibration.core.wiring import call_arguments
from calibration.plan.apply import UndoError
from calibration.probes.time_probe import TIME_TOLERANCE
from runtime import Pipeline
from runtime.estimate import DEFAULT_MARGIN


def calibrate_pipeline(
    pipe_factory: Callable[[int], object],
    pipeline: Pipeline,
    defaults: Shapes,
    *,
    target: Point | None = None,
    probe: Point | None = None,
    warmup: Point | None = None,
    call_kwargs: Callable[[int], Mapping[str, object]] | None = None,
    margin: float = DEFAULT_MARGIN,
    verify: bool = False,
    device: str = "cpu",
    seed: int = 0,
    threads: int | None = 1,
    repeat: int = 3,
    clock: str = "auto",
    progress: Progress | None = None,
    label: str = "",
    formula_path: str = "",
    time_tolerance: float | None = TIME_TOLERANCE,
    offload: Placing | None = None,
    capacity: int | None = None,
) -> Calibration:
    """Build the pipeline (``pipe_factory(seed)``), wire it through its formulas, calibrate
    (placed under ``offload`` on a device capped at ``capacity``: ``calibration.core.offload``)
    from the ``defaults`` shapes, each given size over them."""
    config = RunConfig(
        device=device,
        margin=margin,
        repeat=repeat,
        clock=clock,
        seed=seed,
        threads=threads,
        time_tolerance=time_tolerance,
        offload=offload,
        capacity=capacity,
    )
    given = Shapes(warmup or {}, probe or {}, target or {})
    return calibrate_configured(
        Built(pipe_factory, pipeline, defaults, call_kwargs, label, formula_path),
        given,
        config,
        verify=verify,
        progress=progress,
    )


@frozen
class Built:
    """What is calibrated: the pipeline's factory and formulas, its demo shapes, its call's
    constant arguments, and the names the calibration records (example or factory, file)."""

    build: Callable[[int], object]
    formulas: Pipeline
    defaults: Shapes
    call_kwargs: Callable[[int], Mapping[str, object]] | None = None
    label: str = ""
    formula_path: str = ""


def calibrate_configured(
    built: Built,
    given: Shapes,
    config: RunConfig,
    *,
    verify: bool = False,
    progress: Progress | None = None,
) -> Calibration:
    """``built`` calibrated at the ``given`` shapes over its defaults, run as ``config`` says
    (`dslc calibrate` and `dslc plan` come here with the command line's configuration)."""
    from calibration.core.host import resolve_device

    pipeline = built.formulas
    full = shapes(
        pipeline, built.defaults, target=given.target, probe=given.probe, warmup=given.warmup
    )
    for point in (full.target, full.probe, full.warmup):  # before the pipeline is built
        call_arguments(pipeline, point)
    config = attrs.evolve(config.placed(), device=resolve_device(config.device))
    if config.device == "cpu":
        keep_freed_memory()  # no page faults in a request's CPU time (calibration.core.heap)
    with quiet_libraries(), torch_threads(config.device, config.threads):
        (progress or (lambda step, total, what: None))(0, 1, "building the pipeline")
        session = Session.open(
            built.build(config.seed),  # type: ignore[arg-type]  # any diffusers pipeline; pipeline_facts
            pipeline,
            config,
            call_kwargs=built.call_kwargs,
        )
        return _released(  # taken off the pipeline afterwards (a saved plan undone)
            session,
            lambda: calibrate_session(
                session,
                target=full.target,
                probe=full.probe,
                warmup=full.warmup,
                margin=config.margin,
                verify=verify,
                repeat=config.repeat,
                progress=progress,
                label=built.label,
                formula_path=built.formula_path,
                time_tolerance=config.time_tolerance,
            ),
        )


def _released(session: Session, measure: Callable[[], Calibration]) -> Calibration:
    """``measure()``, then the session's placement taken off; a final undo that fails keeps the
    measurement (``undo_failed``: why, and what each component was left with)."""
    measured: list[Calibration] = []
    try:
        with session.placement():
            measured.append(measure())
    except UndoError as exc:
        if not measured:
            raise
        left = tuple(sorted(exc.left.items()))
        return attrs.evolve(measured[0], undo_failed=UndoFailed(str(exc), left))
    return measured[0]
