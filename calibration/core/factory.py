"""``--pipeline MODULE:FACTORY``: a user's own pipeline factory, found by module or file path.

The factory is a callable taking the seed (or nothing) and returning a diffusers pipeline. Its
module may also define ``call_kwargs(seed)`` (the constant ``pipe(...)`` arguments) and demo shapes
``WARMUP``, ``PROBE`` and ``TARGET`` (dicts of formula params), used when the command line gives
none. A module name is found as `python -m` finds one (the current folder first), and a name
the module lacks gets a did-you-mean.
Importing the module runs its code: it is the user's own code, as with any plugin.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from attrs import field, frozen

from artifact.errors import did_you_mean
from artifact.limits import MAX_MEMBERS
from artifact.point import Point
from artifact.spelling import passed_value, path_text
from calibration.core.shapes import Shapes
from calibration.errors import CalibrationError
from dslc.limits import MAX_LITERAL_DIGITS

T = TypeVar("T")


@frozen
class Factory:
    """What ``--pipeline`` names: the factory, and what its module offers beside it."""

    spec: str
    build: Callable[[int], object]  # the user's pipeline: checked against its formulas later
    call_kwargs: Callable[[int], Mapping[str, object]] | None
    warmup: Point | None = field(default=None, hash=False)  # the module's WARMUP, if any
    probe: Point | None = field(default=None, hash=False)  # ... PROBE
    target: Point | None = field(default=None, hash=False)  # ... TARGET
    option: str = "--pipeline"  # the option that named it (``--model``: a folder, no module)

    def given(self) -> dict[str, Point | None]:
        """The module's demo shapes by attribute (``WARMUP``, ``PROBE``, ``TARGET``)."""
        return {"WARMUP": self.warmup, "PROBE": self.probe, "TARGET": self.target}

    def shapes(self, given: Shapes) -> Shapes:
        """The demo shapes: the module's WARMUP/PROBE/TARGET, else ``given``'s probe and target
        (``CalibrationError`` when neither gives a target or a probe)."""
        module = self.option == "--pipeline"
        if self.target is None and not given.target:
            raise CalibrationError(
                f"{self.option}: give --target (the formulas' default workload is rarely a "
                "CPU-sized run)" + (", or define TARGET in the factory's module" if module else "")
            )
        if self.probe is None and not given.probe:
            raise CalibrationError(
                f"{self.option}: give --probe"
                + (", or define PROBE in the factory's module" if module else "")
            )
        probe = dict(self.probe or {})
        warmup = dict(self.warmup) if self.warmup else probe
        return Shapes(warmup, probe, dict(self.target or {}))


def _module(where: str) -> ModuleType:
    """The factory's module; whatever its code raises is the user's error, named with the input."""
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where)
        if not path.is_file():
            raise CalibrationError(f"--pipeline: no file {path_text(where)}")
        name = "_dslc_pipeline_" + "".join(c if c.isalnum() else "_" for c in path.stem)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise CalibrationError(f"--pipeline: cannot import {path_text(where)}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code, any failure
            sys.modules.pop(name, None)
            raise _user_error(f"cannot import {path_text(where)}", exc) from None
        return module
    if not all(part.isidentifier() for part in where.split(".")):
        raise CalibrationError(
            f"--pipeline: {where!r} is not a module name (dotted identifiers, e.g. my_pipes.sd, "
            "or a path to a .py file)"
        )
    try:
        with _cwd_first():
            return importlib.import_module(where)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code, any failure
        raise _user_error(f"cannot import module {where!r}", exc) from None


@contextlib.contextmanager
def _cwd_first() -> Iterator[None]:
    """The current folder first on the search path for the factory's import only, as `python -m`
    has it: a module beside the user imports though the `dslc` script's folder is no such place."""
    entry = os.getcwd()
    sys.path.insert(0, entry)
    importlib.invalidate_caches()  # a module written since the last import is found
    try:
        yield
    finally:
        if sys.path and sys.path[0] == entry:
            del sys.path[0]
        elif entry in sys.path:  # the module's import moved it: remove the entry we added
            sys.path.remove(entry)


def _hint(module: ModuleType, name: str) -> str:
    """`; did you mean 'build'?` for the module's public callable closest to ``name``, if any."""
    known = [
        attr for attr, value in vars(module).items() if callable(value) and not attr.startswith("_")
    ]
    best = did_you_mean(name, known)
    return f"; did you mean {best!r}?" if best is not None else ""


def _user_error(what: str, exc: BaseException, option: str = "--pipeline") -> CalibrationError:
    """The user's code failed (a syntax error, an import, an exception, ``sys.exit``): exit 1."""
    if isinstance(exc, SyntaxError):
        detail = f"SyntaxError: {exc.msg} (line {exc.lineno})"
    elif isinstance(exc, SystemExit):
        detail = f"it called sys.exit({exc.code!r})"
    else:
        detail = f"{type(exc).__name__}: {_first_line(str(exc))}"
    return CalibrationError(f"{option}: {what}: {detail}")


def _first_line(text: str, limit: int = 300) -> str:
    line = (text.splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit] + "..."


#: The demo shapes a factory's module may define.
SHAPES = ("WARMUP", "PROBE", "TARGET")


def _shape(where: str, attr: str, value: object) -> Point | None:
    """A module's demo shape: a mapping of param names to ints and bools, bounded as a command
    line's (``--warmup``); anything else a ``CalibrationError`` naming it (the formulas then check
    each name and type)."""
    if value is None:
        return None
    what = f"--pipeline: {attr} of {where}"
    if not isinstance(value, Mapping):
        raise CalibrationError(f"{what} is {type(value).__name__}, not a dict of params")
    if len(value) > MAX_MEMBERS:
        raise CalibrationError(f"{what} has {len(value)} entries (at most {MAX_MEMBERS})")
    out: dict[str, int | bool] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise CalibrationError(f"{what}: the key {passed_value(key)} is not a param name")
        if not isinstance(item, int) or abs(item) >= 10**MAX_LITERAL_DIGITS:
            raise CalibrationError(
                f"{what}: {key} is {passed_value(item)} ({type(item).__name__}); a param takes "
                f"an int of at most {MAX_LITERAL_DIGITS} digits, or a bool"
            )
        out[key] = item
    return out


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
        raise CalibrationError(f"--pipeline: {where} has no callable {name!r}{_hint(module, name)}")
    kwargs = getattr(module, "call_kwargs", None)
    warmup, probe, target = (_shape(where, attr, getattr(module, attr, None)) for attr in SHAPES)
    return Factory(
        spec,
        checked_build(spec, _seeded(build)),
        _checked_kwargs(spec, _seeded(kwargs)) if callable(kwargs) else None,
        warmup,
        probe,
        target,
    )


def checked_build(
    spec: str, build: Callable[[int], object], what: str = "the factory", option: str = "--pipeline"
) -> Callable[[int], object]:
    """The factory, its failures and a result that is no pipeline a ``CalibrationError``
    (``option``: the command-line option that named it, first in the message)."""

    def checked(seed: int) -> object:
        try:
            pipe = build(seed)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code, any failure
            raise _user_error(f"{what} {spec} failed", exc, option) from None
        if not isinstance(getattr(pipe, "components", None), Mapping) or not callable(pipe):
            raise CalibrationError(
                f"{option}: {what} {spec} returned {type(pipe).__name__}, not a diffusers "
                "pipeline (a callable with a `components` mapping)"
            )
        return pipe

    return checked


def _checked_kwargs(
    spec: str, kwargs: Callable[[int], object]
) -> Callable[[int], Mapping[str, object]]:
    """The module's ``call_kwargs``, its failures and a result that is no mapping typed."""

    def checked(seed: int) -> Mapping[str, object]:
        try:
            value = kwargs(seed)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code, any failure
            raise _user_error(f"call_kwargs of {spec} failed", exc) from None
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise CalibrationError(
                f"--pipeline: call_kwargs of {spec} returned {type(value).__name__}, not a mapping "
                "of keyword names to values"
            )
        return value

    return checked
