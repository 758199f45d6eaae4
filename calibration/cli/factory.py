"""``--pipeline MODULE:FACTORY``: a user's own pipeline factory, found by module or file path.

The factory is a callable taking the seed (or nothing) and returning a diffusers pipeline. Its
module may also define ``call_kwargs(seed)`` (the constant ``pipe(...)`` arguments) and demo shapes
``WARMUP``, ``PROBE`` and ``TARGET`` (dicts of formula params), used when the command line gives
none.
Importing the module runs its code: it is the user's own code, as with any plugin.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from attrs import frozen

from calibration.errors import CalibrationError
from calibration.wiring import Params

T = TypeVar("T")


@frozen
class Factory:
    """What ``--pipeline`` names: the factory, and what its module offers beside it."""

    spec: str
    build: Callable[[int], object]  # the user's pipeline: checked against its formulas later
    call_kwargs: Callable[[int], Mapping[str, object]] | None
    shapes: tuple[Params | None, Params | None, Params | None]  # warmup, probe, target


def _module(where: str) -> ModuleType:
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where)
        if not path.is_file():
            raise CalibrationError(f"--pipeline: no file {where}")
        name = "_dslc_pipeline_" + path.stem
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise CalibrationError(f"--pipeline: cannot import {where}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(where)
    except ImportError as exc:
        raise CalibrationError(f"--pipeline: cannot import module {where!r}: {exc}") from None


def _seeded(fn: Callable[..., T]) -> Callable[[int], T]:
    """``fn(seed)`` when it takes an argument, else ``fn()``."""
    try:
        takes = bool(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        takes = True
    return fn if takes else (lambda seed: fn())


def load_factory(spec: str) -> Factory:
    """``MODULE:FACTORY`` or ``path/to/file.py:FACTORY`` -> the factory and its module's extras."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise CalibrationError(
            f"--pipeline {spec!r}: expected MODULE:FACTORY or FILE.py:FACTORY "
            "(e.g. tests/calibration/custom_pipeline.py:build)"
        )
    module = _module(where)
    build = getattr(module, name, None)
    if not callable(build):
        raise CalibrationError(f"--pipeline: {where} has no callable {name!r}")
    kwargs = getattr(module, "call_kwargs", None)
    shapes = tuple(
        dict(value) if isinstance(value := getattr(module, attr, None), Mapping) else None
        for attr in ("WARMUP", "PROBE", "TARGET")
    )
    return Factory(
        spec,
        _seeded(build),
        _seeded(kwargs) if callable(kwargs) else None,
        (shapes[0], shapes[1], shapes[2]),
    )
