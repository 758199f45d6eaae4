"""`dslc infer`'s inputs checked before anything runs: the skeleton file and the base.

Every check here is cheap and names what the user gave: the ``--params`` file (read as the
compiler reads a source: a regular file, non-blocking, at most ``MAX_FILE_BYTES``), its errors
at its own path and line, and each name of the base with where it came from (``--base``, the
example's warmup or the factory module's ``WARMUP``). A base may cost no more than the default
workload: every int param at most its default (any cost that grows with each param is then
at most the default workload's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import frozen

from artifact.atomic import NotARegularFileError
from artifact.errors import ParamError
from artifact.point import Point
from artifact.spelling import passed_value, path_text
from artifact.strict_json import read_regular
from calibration.errors import CalibrationError
from runtime import Pipeline

if TYPE_CHECKING:
    from calibration.core.factory import Factory

#: Where each part of a base came from, in the order they apply (later ones win).
Origins = Sequence[tuple[str, Mapping[str, object]]]


def read_skeleton(path: Path) -> str:
    """The ``--params`` file's text: a regular file of at most ``MAX_FILE_BYTES`` (as `dslc
    check` reads a source), opened non-blocking so that a FIFO never waits for a writer."""
    from dslc.limits import MAX_FILE_BYTES

    shown = path_text(path)
    try:
        data = read_regular(path, MAX_FILE_BYTES)
    except NotARegularFileError as exc:
        raise CalibrationError(f"--params {shown} {exc.strerror}") from None
    except OSError as exc:
        raise CalibrationError(f"--params {shown}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CalibrationError(
            f"--params {shown}: over {MAX_FILE_BYTES:,} bytes (the limit of a formula file)"
        )
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise CalibrationError(
            f"--params {shown}: not UTF-8 text (byte {exc.start}); is this a binary file?"
        ) from None


@frozen
class Skeleton:
    """A skeleton that compiles alone: its pipeline, named as the user named the file."""

    text: str
    source: str
    pipeline: Pipeline


def checked_skeleton(text: str, source: str) -> Skeleton:
    """The skeleton compiled under its own name (errors at ``source:line:column``): one pipeline,
    no stages, at most the int params infer searches."""
    from dslc.build import NotCompiled, load_text

    try:
        book = load_text(text, source)
    except NotCompiled as exc:
        raise CalibrationError(str(exc)) from None
    if len(book) != 1:
        raise CalibrationError(
            f"{source}: a skeleton holds exactly one pipeline; it has {len(book)}"
        )
    (name,) = book
    pipeline = book[name]
    if pipeline.stages:
        raise CalibrationError(
            f"{source}: the pipeline {name!r} declares stages already; infer proposes them: "
            "give params, `call` and `probe` lines only"
        )
    return Skeleton(text, source, pipeline)


@frozen
class Source:
    """The pipeline infer measures: its factory, call arguments, the base it offers and where
    that base came from, and its name in the draft's header."""

    build: Callable[[int], object]
    call_kwargs: Callable[[int], Mapping[str, object]] | None
    start: tuple[str, Mapping[str, object]]
    label: str


def pipeline_source(
    example: str | None, factory: str | None, folder: Factory | None = None
) -> Source:
    """--model's folder (no base of its own), --pipeline's factory (its module's WARMUP the base)
    or --example's (its warmup)."""
    from calibration.core.factory import load_factory
    from calibration.examples import EXAMPLES

    if folder is not None:
        return Source(folder.build, None, (folder.spec, {}), folder.spec)
    if factory is not None:
        loaded = load_factory(factory)
        origin = f"WARMUP of {factory.rpartition(':')[0]}"
        return Source(loaded.build, loaded.call_kwargs, (origin, loaded.warmup or {}), factory)
    chosen = EXAMPLES[example or ""]
    origin = f"the example {chosen.name}'s warmup"
    return Source(
        chosen.build, chosen.call_kwargs, (origin, chosen.warmup or {}), f"--example {chosen.name}"
    )


def _declared(pipeline: Pipeline) -> str:
    names = list(pipeline.params)
    return f"it declares {', '.join(names)}" if names else "it declares no params"


def checked_base(pipeline: Pipeline, origins: Origins) -> dict[str, int | bool]:
    """The base: the cheapest admissible size (``cheapest_base``: steps and sizes at their
    smallest the ranges and contracts allow) with each origin's values in turn, every name
    declared, every value of its param's type, admissible, and no int above its default; the
    default workload under the given values where the cheapest size does not go with them."""
    from calibration.infer.ladder import cheapest_base

    given: dict[str, int | bool] = {}
    came_from: dict[str, str] = {}
    for origin, values in origins:
        for name, value in values.items():
            if name not in pipeline.params:
                raise CalibrationError(
                    f"{origin} names {passed_value(name)}, which the skeleton's pipeline "
                    f"{pipeline.name!r} does not declare ({_declared(pipeline)})"
                )
            kind = pipeline.params[name].type
            if not _typed(kind, value):
                raise CalibrationError(
                    f"{origin}: {name} takes {'a bool' if kind == 'bool' else 'an int'}; "
                    f"got {passed_value(value)} ({type(value).__name__})"
                )
            given[name] = value  # type: ignore[assignment]  # checked by _typed
            came_from[name] = origin
    try:
        point = {**cheapest_base(pipeline), **given}
        if given and not pipeline.is_admissible(**point):
            point = {**pipeline.default_workload, **given}
        broken = () if pipeline.is_admissible(**point) else pipeline.violations(**point)
    except ParamError as exc:
        raise CalibrationError(f"the base: {exc}") from None
    if broken:
        raise CalibrationError(f"the base {point} is not admissible: {'; '.join(broken)}")
    _within_default(pipeline, point, came_from)
    return point


def _typed(kind: str, value: object) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, int) and not isinstance(value, bool)


def _within_default(pipeline: Pipeline, point: Point, came_from: Mapping[str, str]) -> None:
    """No int of the base above its default: the base is the cheap size the ladder starts from,
    and a size above the default workload is a run longer than the one the formulas describe."""
    default = pipeline.default_workload
    for name, value in point.items():
        if pipeline.params[name].type == "int" and value > default[name]:
            raise CalibrationError(
                f"{came_from.get(name, 'the base')}: {name}={value} is above the default "
                f"workload's {name}={default[name]}; a base costs no more than the default "
                "workload (every int param at most its default): give a smaller one"
            )
