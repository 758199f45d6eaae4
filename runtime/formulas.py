"""FormulaBook and Pipeline: checked, exact evaluation of compiled formulas for a serving worker."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from types import MappingProxyType

from .artifact import read_artifact
from .checks import show
from .codegen import PipelinePlan
from .domain import SEARCH_LIMIT, Args, Domain
from .errors import (
    ArtifactError,
    EvaluationError,
    ParamError,
    UnknownPipelineError,
    UnknownStageError,
)
from .evaluator import NO_POSITIONAL, UNDEFINED, compile_plans, instantiate, plan_pipeline
from .ir import Artifact, ComponentUse, ParamInfo, PipelineDecl, SourceDecl, StageValues

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "SEARCH_LIMIT",
    "ComponentUse",
    "FormulaBook",
    "ParamInfo",
    "Pipeline",
    "StageValues",
    "load_formulas",
]

_FIELDS = ("iterations", "memory", "time")


class _Keyword:
    """`largest_admissible`'s bound was not given by position: it is the `at_most` keyword."""

    __slots__ = ()


_KEYWORD = _Keyword()


class Pipeline:
    """One resolved pipeline: checked, exact evaluation over closures built once at load.

    `iterations`, `memory` and `time` below are the reference implementation. Each instance
    shadows them with generated entries (runtime/evaluator.py) that bind params in C, answer the
    regular case inline and hand anything irregular back to these methods, so both behave alike.
    """

    def __init__(
        self,
        decl: PipelineDecl,
        plan: PipelinePlan | None = None,
        factories: dict[str, Callable[..., Any]] | None = None,
    ) -> None:
        """Build from a validated declaration; a FormulaBook passes the plan and the factories it
        compiled for all its pipelines at once."""
        self.name = decl.name
        self.extends = decl.extends
        self.stages = tuple(s.name for s in decl.stages)
        self.contracts = tuple(c.text for c in decl.contracts)
        self.param_names = tuple(p.name for p in decl.params)
        owned = {
            p.name: tuple(c.text for c in decl.contracts if c.param == p.name) for p in decl.params
        }
        self.params: Mapping[str, ParamInfo] = MappingProxyType(
            {
                p.name: ParamInfo(p.name, p.type, p.default, p.min, p.max, owned[p.name])
                for p in decl.params
            }
        )
        # Facts for the calibration library: which component calls open each stage, which stage
        # the step callback counts, the pipeline's `__call__` keywords and the probe axes.
        self.uses: Mapping[str, tuple[ComponentUse, ...]] = MappingProxyType(
            {s.name: s.uses for s in decl.stages}
        )
        self.stepped_stages = tuple(s.name for s in decl.stages if s.per_step)
        self.call_names = tuple(c.arg for c in decl.calls)
        self.probe_axes = decl.probe_axes
        plan = plan or plan_pipeline(decl)
        factories = factories or compile_plans([plan])
        compiled = instantiate(decl, plan, factories, tuple(self._fallback(k) for k in range(3)))
        self._domain = Domain(decl, compiled.admissible, compiled.contracts)
        self._defaults = self._domain.defaults
        self._fields = tuple(
            dict(zip(self.stages, (f[k] for f in compiled.fields))) for k in range(3)
        )
        self._iters = compiled.iterations
        self._every = compiled.every
        self._terms = {st: t for st, t in zip(self.stages, compiled.terms) if t}
        self._time_terms = {st: t for st, t in zip(self.stages, compiled.time_terms) if t}
        self._calls = compiled.calls
        # The generated Python (built from indices only, never from the file's text), for reading.
        self.source = compiled.source
        self._default_iterations = self._check_defaults(decl.index)
        self.iterations, self.memory, self.time = compiled.checked  # type: ignore[assignment]
        for fast, reference in zip(
            compiled.checked, (Pipeline.iterations, Pipeline.memory, Pipeline.time)
        ):
            fast.__doc__ = reference.__doc__

    def __repr__(self) -> str:
        return (
            f"<Pipeline {self.name!r}: params {', '.join(self.param_names)}; stages "
            f"{', '.join(self.stages)}>"
        )

    @property
    def default_workload(self) -> dict[str, int | bool]:
        """The params' defaults: the estimators' target workload (a fresh dict)."""
        return dict(zip(self.param_names, self._defaults))

    def iterations(self, stage: str, /, **params: int | bool) -> int:
        """How many times the stage's repeated unit runs at this point (missing params:
        defaults).
        """
        value = self._value(0, stage, params)
        assert type(value) is int
        return value

    def memory(self, stage: str, /, **params: int | bool) -> int | Fraction:
        """What the stage's activation memory is proportional to, exactly."""
        return self._value(1, stage, params)

    def time(self, stage: str, /, **params: int | bool) -> int | Fraction:
        """What one iteration's time is proportional to, exactly."""
        return self._value(2, stage, params)

    def memory_terms(self, stage: str, /, **params: int | bool) -> tuple[int | Fraction, ...]:
        """Each term of the stage's memory measure at this point (one term: `(memory,)`), exactly.

        Params are bound and checked as by `memory`; every term must be non-negative, and
        `memory` is their sum.
        """
        return self._measure_terms(1, self._terms, stage, params)

    def time_terms(self, stage: str, /, **params: int | bool) -> tuple[int | Fraction, ...]:
        """Each term of the stage's time measure at this point (one term: `(time,)`), exactly.

        Params are bound and checked as by `time`; every term must be non-negative, and `time` is
        their sum.
        """
        return self._measure_terms(2, self._time_terms, stage, params)

    def _measure_terms(
        self,
        field: int,
        table: Mapping[str, tuple[Callable[..., Any], ...]],
        stage: str,
        params: Mapping[str, int | bool],
    ) -> tuple[int | Fraction, ...]:
        if stage not in self._fields[field]:
            raise UnknownStageError(self.name, str(stage), self.stages)
        args = self._domain.bind(params) if params else self._defaults
        terms = table.get(stage)
        if terms is None:
            return (self._field(field, stage, args),)
        values = []
        for j, fn in enumerate(terms):
            what = f"{stage}.{_FIELDS[field]}[{j}]"
            values.append(self._check(field, stage, self._call(fn, args, what), args, what))
        return tuple(values)

    def evaluate(self, /, **params: int | bool) -> dict[str, StageValues]:
        """Every stage's iterations, memory and time at one point."""
        args = self._domain.bind(params) if params else self._defaults
        values = self._every(*args)  # every field in one call: each let computed once
        result = {}
        for s, stage in enumerate(self.stages):
            iterations, memory, time = (
                self._check(k, stage, self._defined(values[3 * s + k], stage, k, args), args)
                for k in range(3)
            )
            result[stage] = StageValues(int(iterations), memory, time)
        return result

    def stage_iterations(
        self, probe: Mapping[str, int | bool], target: Mapping[str, int | bool] | None = None
    ) -> dict[str, tuple[int, int]]:
        """Per stage `(measured, target)`: iterations at the probe and at the target (default
        workload).
        """
        measured = self._all_iterations(probe)
        wanted = self._default_iterations if target is None else self._all_iterations(target)
        return {stage: (m, t) for stage, m, t in zip(self.stages, measured, wanted)}

    def call_arguments(self, /, **params: int | bool) -> dict[str, int | Fraction | bool]:
        """Every declared `call` argument (the pipeline's `__call__` keyword -> value, in
        declaration order) at the default workload overridden by `params`, checked as `evaluate`."""
        args = self._domain.bind(params) if params else self._defaults
        if self._calls is None:
            return {}
        return dict(zip(self.call_names, self._call(self._calls, args, "calls")))

    def is_admissible(self, /, **params: int | bool) -> bool:
        """Whether the point lies in every range and satisfies every contract (types are
        checked).
        """
        args, in_range = self._domain.assign(params)
        return in_range and self._domain.holds(args)

    def violations(self, /, **params: int | bool) -> tuple[str, ...]:
        """Each range or contract the point violates, readably (`frames = 80 violates ...`)."""
        return self._domain.violations(self._domain.assign(params)[0])[0]

    def largest_admissible(
        self, name: str, at_most: int | _Keyword = _KEYWORD, /, **others: int | bool
    ) -> int | None:
        """The largest value of int param `name`, at most `at_most`, admissible with `others`, found
        within SEARCH_LIMIT values below `at_most` (capped by the range); else None.

        `at_most` may come by keyword; for a pipeline with a param named `at_most`, pass the bound
        by position (`largest_admissible("frames", 60, at_most=3)`): a keyword is then the param.
        """
        if isinstance(at_most, _Keyword):
            if "at_most" not in others:
                raise TypeError("largest_admissible() needs the bound `at_most`")
            at_most = others.pop("at_most")  # type: ignore[assignment]
        return self._domain.largest(name, at_most, others)

    def compiled_iterations(self, stage: str) -> Callable[..., int | Fraction]:
        """The raw closure: unchecked, every param positional, in `param_names` order."""
        return self._raw(0, stage)

    def compiled_memory(self, stage: str) -> Callable[..., int | Fraction]:
        """The raw memory closure (unchecked; see `compiled_iterations`)."""
        return self._raw(1, stage)

    def compiled_time(self, stage: str) -> Callable[..., int | Fraction]:
        """The raw time closure (unchecked; see `compiled_iterations`)."""
        return self._raw(2, stage)

    # ------------------------------------------------------------ internals

    def _fallback(self, field: int) -> Callable[..., object]:
        """The general path behind a fast entry: rebuild the params given, call the reference
        method.
        """
        method = (Pipeline.iterations, Pipeline.memory, Pipeline.time)[field]

        def fallback(
            stage: str, unknown: dict[str, object], values: tuple[object, ...], guard: object
        ) -> object:
            """Called by the fast entry with the values it bound, to redo the call the slow way."""
            if guard is not NO_POSITIONAL:
                raise TypeError(
                    f"{_FIELDS[field]}() takes the stage by position and params by keyword only"
                )
            params = {
                n: v for n, v, d in zip(self.param_names, values, self._defaults) if v is not d
            }
            params.update(unknown)
            return method(self, stage, **params)  # type: ignore[arg-type]

        return fallback

    def _value(self, field: int, stage: str, params: Mapping[str, object]) -> int | Fraction:
        """The reference path of `iterations`, `memory` and `time`."""
        if stage not in self._fields[field]:
            raise UnknownStageError(self.name, str(stage), self.stages)
        args = self._domain.bind(params) if params else self._defaults
        return self._field(field, stage, args)

    def _field(self, field: int, stage: str, args: Args) -> int | Fraction:
        """One stage field at a bound point, with its division and result checks."""
        fn = self._fields[field][stage]
        return self._check(field, stage, self._call(fn, args, f"{stage}.{_FIELDS[field]}"), args)

    def _call(self, fn: Callable[..., Any], args: Args, what: str | None = None) -> Any:
        """Call a closure; division by zero becomes an EvaluationError naming the stage field."""
        try:
            return fn(*args)
        except ZeroDivisionError:
            what = what or self._culprit(args)
            message = (
                f"division by zero evaluating {self.name}.{what} at {self._domain.point(args)}"
            )
            raise EvaluationError(message, self.name, what) from None

    def _defined(self, value: object, stage: str, field: int, args: Args) -> object:
        """A value from `every`, which holds UNDEFINED where the field divided by zero."""
        if value is UNDEFINED:
            what = f"{stage}.{_FIELDS[field]}"
            message = (
                f"division by zero evaluating {self.name}.{what} at {self._domain.point(args)}"
            )
            raise EvaluationError(message, self.name, what)
        return value

    def _check(
        self, field: int, stage: str, value: object, args: Args, what: str | None = None
    ) -> int | Fraction:
        """Iterations must be a non-negative int, measures (and memory terms, `what` naming the
        term) non-negative, exact int or Fraction."""
        if _valid(field, value):
            return value  # type: ignore[return-value]
        want = "a non-negative integer" if field == 0 else "non-negative"
        what = what or f"{stage}.{_FIELDS[field]}"
        message = f"{self.name}.{what} is {show(value)}, not {want}, at {self._domain.point(args)}"
        raise EvaluationError(message, self.name, what)

    def _all_iterations(self, params: Mapping[str, object]) -> tuple[int, ...]:
        """Every stage's iterations at one point, in one call (for `stage_iterations`)."""
        if not isinstance(params, Mapping):
            message = f"expected a mapping of params, got {type(params).__name__}"
            raise ParamError(message, self.name, None)
        args = self._domain.bind(params) if params else self._defaults
        values = self._call(self._iters, args)
        assert isinstance(values, tuple)
        return tuple(int(self._check(0, stage, v, args)) for stage, v in zip(self.stages, values))

    def _raw(self, field: int, stage: str) -> Callable[..., int | Fraction]:
        """A stage field's closure as is, for callers that check their own points."""
        fn = self._fields[field].get(stage)
        if fn is None:
            raise UnknownStageError(self.name, str(stage), self.stages)
        return fn  # type: ignore[return-value]

    def _culprit(self, args: Args) -> str:
        """Which stage field divides by zero (re-evaluated one by one, only on the error path)."""
        for k, table in enumerate(self._fields):
            for stage, fn in table.items():
                try:
                    fn(*args)
                except ZeroDivisionError:
                    return f"{stage}.{_FIELDS[k]}"
        return "a stage"

    def _check_defaults(self, index: int) -> tuple[int, ...]:
        """The default workload must be admissible and evaluable, or the artifact is broken."""
        where = f"pipelines[{index}]"
        for k in self._domain.failing_contracts(self._defaults)[:1]:
            message = f"the default workload violates `{self.contracts[k]}`"
            raise ArtifactError(f"{where}.contracts[{k}]", message)
        values = self._every(*self._defaults)  # one call: each let computed once
        checks = []  # (field, index in values, path): each stage's fields, then the terms
        term = 3 * len(self.stages)  # memory terms, then time terms, follow every field
        for s, stage in enumerate(self.stages):
            for k in range(3):
                checks.append((k, 3 * s + k, f"{where}.stages[{s}].{_FIELDS[k]}.expr"))
        for k, table in ((1, self._terms), (2, self._time_terms)):
            for s, stage in enumerate(self.stages):
                for j in range(len(table.get(stage, ()))):
                    path = f"{where}.stages[{s}].{_FIELDS[k]}.terms[{j}].expr"
                    checks.append((k, term, path))
                    term += 1
        for k, at, path in checks:
            value = values[at]
            if value is UNDEFINED or not _valid(k, value):
                problem = "division by zero" if value is UNDEFINED else show(value)
                message = f"at the default workload this is {problem}, which is invalid"
                raise ArtifactError(path, message)
        if self._calls is not None:  # values of any type; only a division by zero is invalid
            try:
                self._calls(*self._defaults)
            except ZeroDivisionError:
                message = "at the default workload this is division by zero, which is invalid"
                raise ArtifactError(f"{where}.calls", message) from None
        return tuple(values[3 * s] for s in range(len(self.stages)))


def _valid(field: int, value: object) -> bool:
    """Iterations (field 0) are non-negative ints; measures non-negative ints or Fractions."""
    if type(value) is int:
        return value >= 0
    return field != 0 and type(value) is Fraction and value >= 0


class FormulaBook(Mapping[str, Pipeline]):
    """Every pipeline of one artifact by name; `book["x"]` raises UnknownPipelineError (a
    KeyError).
    """

    __slots__ = ("_pipelines", "compiler", "format_version", "sources")

    def __init__(self, artifact: Artifact) -> None:
        plans = [plan_pipeline(decl) for decl in artifact.pipelines]
        factories = compile_plans(plans)  # one compile for the book: shared formulas compile once
        self._pipelines = {
            decl.name: Pipeline(decl, plan, factories)
            for decl, plan in zip(artifact.pipelines, plans)
        }
        self.format_version = artifact.format_version
        self.compiler = (artifact.compiler_name, artifact.compiler_version)
        self.sources: tuple[SourceDecl, ...] = artifact.sources

    def __getitem__(self, name: str) -> Pipeline:
        try:
            return self._pipelines[name]
        except (KeyError, TypeError):
            raise UnknownPipelineError(str(name), tuple(self._pipelines)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._pipelines)

    def __len__(self) -> int:
        return len(self._pipelines)

    def __repr__(self) -> str:
        return f"<FormulaBook: {', '.join(self._pipelines) or 'no pipelines'}>"


def load_formulas(
    source: str | bytes | bytearray | os.PathLike[str] | Mapping[str, object],
) -> FormulaBook:
    """Load and validate an artifact (a path, JSON text or bytes, or a parsed mapping) once, at
    start-up.
    """
    return FormulaBook(read_artifact(source))
