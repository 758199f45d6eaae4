"""One mistake calibrated: its edited formulas compiled in memory, its family's factory, the real
calibration with ``verify`` (or the refusal's message), then scored."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from calibration.examples.mistakes.model import Mistake, Outcome
from calibration.examples.mistakes.score import evaluate
from runtime.kinds import Quantity

if TYPE_CHECKING:
    from calibration.calibrate.run import Calibration
    from runtime import Pipeline

ROOT = Path(__file__).resolve().parents[3]
#: The test SD pipeline (not a built-in example): its factory, by file.
CUSTOM_SD_FACTORY = "tests/calibration/custom_pipeline.py:build"


def edited_text(mistake: Mistake, root: Path = ROOT) -> str:
    """The formula file with the mistake's edits; each ``old`` must occur exactly once."""
    text = (root / mistake.formula_file).read_text()
    for edit in mistake.edits:
        count = text.count(edit.old)
        if count != 1:
            raise ValueError(
                f"{mistake.name}: {edit.old!r} occurs {count} times in {mistake.formula_file}"
            )
        text = text.replace(edit.old, edit.new)
    return text


def compile_mistake(mistake: Mistake, root: Path = ROOT) -> Pipeline:
    """The edited formulas compiled in memory (they must pass `dslc check`) and loaded."""
    from dslc.build import NotCompiled, load_text

    try:
        book = load_text(edited_text(mistake, root), f"{mistake.name}.wf")
    except NotCompiled as exc:
        raise ValueError(f"{mistake.name}: the edited {mistake.formula_file} {exc}") from None
    return book[mistake.pipeline]


def factory(family: str) -> tuple[Callable[[int], object], Callable[[int], Mapping[str, object]]]:
    """The family's pipeline factory and its constant call arguments."""
    if family == "custom_sd":
        from calibration.core.factory import load_factory

        found = load_factory(str(ROOT / CUSTOM_SD_FACTORY))
        assert found.call_kwargs is not None
        return found.build, found.call_kwargs
    from calibration.examples import EXAMPLES

    example = EXAMPLES[family]
    return example.build, example.call_kwargs


def calibrate_mistake(
    mistake: Mistake, *, repeat: int | None = None, threads: int | None = 1
) -> Calibration | str:
    """The real calibration of the edited formulas with ``verify``; a refusal's message instead of
    a Calibration when it raises ``CalibrationError``."""
    from calibration.calibrate.pipeline import calibrate_pipeline
    from calibration.core.shapes import Shapes
    from calibration.errors import CalibrationError
    from calibration.probes.time_probe import TIME_TOLERANCE

    pipeline = compile_mistake(mistake)
    build, call_kwargs = factory(mistake.family)
    try:
        return calibrate_pipeline(
            build,
            pipeline,
            Shapes(mistake.warmup, mistake.probe, mistake.target),
            call_kwargs=call_kwargs,
            verify=True,
            repeat=repeat or mistake.repeat,
            threads=threads,
            label=mistake.name,
            formula_path=mistake.formula_file,
            time_tolerance=TIME_TOLERANCE if Quantity.TIME in mistake.quantities else None,
        )
    except CalibrationError as exc:
        return str(exc)


def run_mistake(
    mistake: Mistake, *, repeat: int | None = None
) -> tuple[Outcome, Calibration | str]:
    """Calibrate one mistake and evaluate it."""
    result = calibrate_mistake(mistake, repeat=repeat)
    return evaluate(mistake, result, compile_mistake(mistake)), result
