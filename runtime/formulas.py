"""Pipeline: checked, exact evaluation of one pipeline's compiled formulas for a serving worker."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from types import MappingProxyType

from artifact.errors import (
    EvaluationError,
    ParamError,
    UnknownStageError,
)
from artifact.expr_text import expr_text
from artifact.ir import ComponentUse, ParamInfo, PipelineDecl, StageValues
from artifact.point import Point
from artifact.spelling import file_value
from runtime.defaults import check_defaults
from runtime.domain import SEARCH_LIMIT, Args, Domain
from runtime.evaluator import (
    FIELD_NAMES,
    NO_POSITIONAL,
    UNDEFINED,
    Every,
    FactoryCache,
    Measure,
    Values,
    instantiate,
    plan_pipeline,
    valid_value,
)
from runtime.flat import Slots, measured_count, plain, slots

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    _T = TypeVar("_T")

__all__ = [
    "SEARCH_LIMIT",
    "ComponentUse",
    "ParamInfo",
    "Pipeline",
    "StageValues",
]

_LAZY = frozenset({"_fields", "_iters", "_every", "_terms", "_time_terms", "_calls", "source"})


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

    # Built on first use by _materialize (through __getattr__), not at load: the loader validates,
    # bounds and checks every pipeline, but generates and compiles code only for those used.
    _fields: tuple[dict[str, Measure], ...]  # per field kind: stage -> closure
    _iters: Values
    _every: Every
    _terms: dict[str, tuple[Measure, ...]]  # memory terms, by stage (when listed)
    _time_terms: dict[str, tuple[Measure, ...]]  # time terms, likewise
    _calls: Values | None
    source: str  # the generated Python (built from indices only, never from the file's text)

    def __init__(
        self,
        decl: PipelineDecl,
        factories: FactoryCache | None = None,
        sources: tuple[str, ...] = (),
    ) -> None:
        """Build from a validated declaration, checking its default workload now; a FormulaBook
        passes the factories its pipelines share (compiled on first use, each text once) and its
        source paths (for ``where``)."""
        self.name = decl.name
        self.extends = decl.extends
        self.stages = tuple(s.name for s in decl.stages)
        self.contracts = tuple(c.text for c in decl.contracts)
        self.param_names = tuple(p.name for p in decl.params)
        owned: dict[str, list[str]] = {p.name: [] for p in decl.params}
        for c in decl.contracts:
            owned[c.param].append(c.text)
        self.params: Mapping[str, ParamInfo] = MappingProxyType(
            {
                p.name: ParamInfo(p.name, p.type, p.default, p.min, p.max, tuple(owned[p.name]))
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
        # `probe frames >= 9`: the smallest value a probe may take on an axis (its steady regime).
        self.probe_minimums: Mapping[str, int] = MappingProxyType(dict(decl.probe_minimums))
        spans = {f"call {c.arg}": c.span for c in decl.calls}
        spans.update({f"stage {st.name}": st.span for st in decl.stages})
        self._fact_spans = spans
        self._sources = sources
        self._decl = decl
        self._factories = factories or FactoryCache()
        self._domain = Domain(decl, self._materialize)
        self._defaults = self._domain.defaults
        self._default_iterations = check_defaults(decl)  # a broken artifact fails at load
        self.measure_slots: Mapping[str, Slots] = MappingProxyType(slots(decl))
        self._measured = measured_count(decl)

    def __getattr__(self, name: str) -> object:
        """The closures, on first use: generate and compile this pipeline's code, then answer."""
        if name in _LAZY:
            self._materialize()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _materialize(self) -> None:
        """Generate, compile and instantiate this pipeline's closures, once (thread-safe); the
        fast entries then shadow the reference `iterations`, `memory` and `time`."""
        with self._factories.lock:
            if "_every" in self.__dict__:
                return
            decl = self._decl
            plan = plan_pipeline(decl)
            fallbacks = tuple(self._fallback(k) for k in range(3))
            compiled = instantiate(decl, plan, self._factories.for_plan(plan), fallbacks)
            for fast, reference in zip(
                compiled.checked, (Pipeline.iterations, Pipeline.memory, Pipeline.time)
            ):
                fast.__doc__ = reference.__doc__
            self._domain.__dict__.update(
                _admissible=compiled.admissible, _contracts=compiled.contracts
            )
            fields = tuple(
                dict(zip(self.stages, (f[k] for f in compiled.fields))) for k in range(3)
            )
            iterations, memory, time = compiled.checked
            self.__dict__.update(
                _fields=fields,
                _iters=compiled.iterations,
                _terms={st: t for st, t in zip(self.stages, compiled.terms) if t},
                _time_terms={st: t for st, t in zip(self.stages, compiled.time_terms) if t},
                _calls=compiled.calls,
                source=compiled.source,
                iterations=iterations,
                memory=memory,
                time=time,
                _every=compiled.every,  # last: its presence marks the pipeline as built
            )

    def __repr__(self) -> str:
        return (
            f"<Pipeline {self.name!r}: params {', '.join(self.param_names)}; stages "
            f"{', '.join(self.stages)}>"
        )

    def where(self, fact: str) -> str:
        """``path:line`` of a fact in its source (``"call num_frames"``, ``"stage DecodingStage"``),
        for messages; ``""`` when the artifact does not say."""
        span = self._fact_spans.get(fact)
        if span is None:
            return ""
        path = self._sources[span[0]] if 0 <= span[0] < len(self._sources) else "<formulas>"
        return f"{path}:{span[1]}"

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

        Point are bound and checked as by `memory`; every term must be non-negative, and
        `memory` is their sum.
        """
        return self._measure_terms(1, self._terms, stage, params)

    def memory_texts(self, stage: str) -> tuple[str | None, ...]:
        """Each declared term of the stage's memory as the formula file writes it (None where
        ``artifact.expr_text`` cannot), for messages that name what a formula lacks."""
        decl = next((s for s in self._decl.stages if s.name == stage), None)
        if decl is None:
            raise UnknownStageError(self.name, str(stage), self.stages)
        lets = tuple(let.name for let in self._decl.lets)
        fields = decl.memory_terms or (decl.memory,)
        return tuple(expr_text(f.expr, self.param_names, lets) for f in fields)

    def time_terms(self, stage: str, /, **params: int | bool) -> tuple[int | Fraction, ...]:
        """Each term of the stage's time measure at this point (one term: `(time,)`), exactly.

        Point are bound and checked as by `time`; every term must be non-negative, and `time` is
        their sum.
        """
        return self._measure_terms(2, self._time_terms, stage, params)

    def _measure_terms(
        self,
        field: int,
        table: Mapping[str, tuple[Measure, ...]],
        stage: str,
        params: Point,
    ) -> tuple[int | Fraction, ...]:
        if stage not in self._fields[field]:
            raise UnknownStageError(self.name, str(stage), self.stages)
        args = self._domain.bind(params) if params else self._defaults
        terms = table.get(stage)
        if terms is None:
            return (self._field(field, stage, args),)
        values = []
        for j, fn in enumerate(terms):
            what = f"{stage}.{FIELD_NAMES[field]}[{j}]"
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

    def point(self, params: Mapping[str, object], /) -> tuple[int | bool, ...]:
        """Every param's value in `param_names` order (defaults for the rest), checked as
        `evaluate` checks `params`, with its errors: a request's key, and `measures`' argument."""
        return tuple(self._domain.bind(params)) if params else self._defaults

    def measures(self, point: tuple[int | bool, ...], /) -> tuple[int | Fraction, ...]:
        """At a `point`: every stage's iterations, memory and time, then its memory terms (where,
        `measure_slots` says), from one call computing each let once, checked as `evaluate` and
        `memory_terms` check theirs, with their errors."""
        values = self._every(*point)
        head = values[: self._measured]
        if not plain(head, len(self.stages)):  # then `evaluate` or `memory_terms` raises
            params = dict(zip(self.param_names, point))
            self.evaluate(**params)
            for stage, slot in self.measure_slots.items():
                if slot.listed:
                    self.memory_terms(stage, **params)
        return head  # type: ignore[return-value]

    def stage_iterations(
        self, probe: Point, target: Point | None = None
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
            at_most = others.pop("at_most")
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
                    f"{FIELD_NAMES[field]}() takes the stage by position and params by keyword only"
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
        return self._check(
            field, stage, self._call(fn, args, f"{stage}.{FIELD_NAMES[field]}"), args
        )

    def _call(self, fn: Callable[..., _T], args: Args, what: str | None = None) -> _T:
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
            what = f"{stage}.{FIELD_NAMES[field]}"
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
        if valid_value(field, value):
            return value  # type: ignore[return-value]
        want = "a non-negative integer" if field == 0 else "non-negative"
        what = what or f"{stage}.{FIELD_NAMES[field]}"
        message = (
            f"{self.name}.{what} is {file_value(value)}, not {want}, at {self._domain.point(args)}"
        )
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
        return fn

    def _culprit(self, args: Args) -> str:
        """Which stage field divides by zero (re-evaluated one by one, only on the error path)."""
        for k, table in enumerate(self._fields):
            for stage, fn in table.items():
                try:
                    fn(*args)
                except ZeroDivisionError:
                    return f"{stage}.{FIELD_NAMES[k]}"
        return "a stage"
