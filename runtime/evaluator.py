"""Compile a book's generated factories once and instantiate each pipeline's closures from them.

The source comes from runtime/codegen.py and never contains text from the artifact; it is
compiled as one module per book (identical factories once) and runs with empty builtins.
"""

from __future__ import annotations

import math
import numbers
import types
from _thread import allocate_lock
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction

from artifact.ir import Frozen, PipelineDecl
from runtime.codegen import FunctionPlan, PipelinePlan, plan_pipeline

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "FIELD_NAMES",
    "NO_POSITIONAL",
    "UNDEFINED",
    "CompiledPipeline",
    "Every",
    "FactoryCache",
    "Generated",
    "Measure",
    "Predicate",
    "compile_pipeline",
    "compile_plans",
    "instantiate",
    "normalize",
    "plan_pipeline",
    "valid_value",
]

#: A generated closure or factory as exec'd from runtime/codegen.py's text: its arity and result
#: are fixed by the codegen role that wrote it, which no annotation of a dict of compiled texts can
#: express; this alias is where that knowledge enters the typed code (each field of CompiledPipeline
#: below names the precise type of its role).
Generated = Callable[..., "Any"]
#: A stage field, memory term or time term: checked to be an int or a Fraction after the call.
Measure = Callable[..., int | Fraction]
#: A contract (alone or all at once): its truth is what counts.
Predicate = Callable[..., object]
#: Several values in one call: every stage's iterations, or every `call` argument.
Values = Callable[..., tuple[int | Fraction | bool, ...]]
#: Every field and term in one call, UNDEFINED where one divides by zero.
Every = Callable[..., tuple[object, ...]]

#: A stage's fields, in the order of the generated closures and of every per-field table.
FIELD_NAMES = ("iterations", "memory", "time")


def valid_value(field: int, value: object) -> bool:
    """Iterations (field 0) are non-negative ints; measures non-negative ints or Fractions."""
    if type(value) is int:
        return value >= 0
    return field != 0 and type(value) is Fraction and value >= 0


class _Undefined:
    """The value of a let that divided by zero: it raises only where a taken branch uses it, so lets
    are as lazy as if they were written inline, yet computed once."""

    __slots__ = ()

    def _raise(self, *_: object) -> object:
        """Every use of an undefined value is the division by zero it stands for."""
        raise ZeroDivisionError("division by zero")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _raise
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _raise
    __pow__ = __rpow__ = __neg__ = __pos__ = __abs__ = __floor__ = __ceil__ = _raise
    __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __index__ = __int__ = _raise
    __eq__ = __ne__ = _raise  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]
    numerator = denominator = property(_raise)

    def __repr__(self) -> str:
        return "<undefined: division by zero>"


numbers.Rational.register(_Undefined)  # so Fraction(x, y) asks for .numerator and raises too
UNDEFINED = _UNDEFINED = _Undefined()


def normalize(value: int | Fraction) -> int | Fraction:
    """An integral Fraction becomes an int, so results compare and print as users expect."""
    if type(value) is int:
        return value
    if value.denominator == 1:
        return value.numerator
    return value


class CompiledPipeline(Frozen):
    """A pipeline's closures; every one takes the params positionally, in declaration order.

    `source` is the generated Python of its factories, for reading and auditing.
    """

    __slots__ = (
        "admissible",
        "calls",
        "checked",
        "contracts",
        "every",
        "fields",
        "iterations",
        "source",
        "terms",
        "time_terms",
    )
    fields: tuple[tuple[Measure, ...], ...]  # per stage: iterations, memory, time
    iterations: Values  # all stages' iterations
    admissible: Predicate | None  # every contract at once (None: no contracts)
    contracts: tuple[Predicate, ...]  # each contract alone
    checked: tuple[Callable[..., object], ...]  # fast checked entries: iterations, memory, time
    source: str
    terms: tuple[tuple[Measure, ...], ...]  # per stage: its memory terms (or none)
    calls: Values | None  # every `call` argument (None: no calls)
    every: Every  # every field (3 per stage), then every memory term, then
    # every time term; UNDEFINED where one divides by zero, each let computed once
    time_terms: tuple[tuple[Measure, ...], ...]  # per stage: its time terms (or none)


def compile_plans(plans: Sequence[PipelinePlan]) -> dict[str, Generated]:
    """Compile every distinct factory of these plans in one module: factory text -> factory."""
    return _compile(
        f.text for plan in plans for f in (*plan.functions, *((plan.lets,) if plan.lets else ()))
    )


def _compile(texts: Iterable[str]) -> dict[str, Generated]:
    """Compile these factory texts (each once) in one module: factory text -> factory."""
    unique = list(dict.fromkeys(texts))
    source = "".join(text.replace("{name}", f"_g{i}", 1) for i, text in enumerate(unique))
    namespace: dict[str, object] = {
        "__builtins__": {}, "_F": Fraction, "_floor": math.floor, "_ceil": math.ceil, "_abs": abs,
        "_min": min, "_max": max, "_n": normalize, "_U": _UNDEFINED, "_Z": ZeroDivisionError,
        "_type": type, "_int": int, "_P": NO_POSITIONAL,
    }  # fmt: skip
    # The source is generated from validated nodes only (runtime/codegen.py); empty builtins are a
    # second fence. This is the only place the runtime compiles anything.
    exec(compile(source, "<workload formulas>", "exec"), namespace)  # noqa: S102
    return {text: namespace[f"_g{i}"] for i, text in enumerate(unique)}  # type: ignore[misc]


class FactoryCache:
    """A book's compiled factories by text, filled as its pipelines are first used: each text is
    compiled once (pipelines with the same formulas share it); `lock` makes a first use
    thread-safe."""

    def __init__(self) -> None:
        self.lock = allocate_lock()
        self.known: dict[str, Generated] = {}

    def for_plan(self, plan: PipelinePlan) -> dict[str, Generated]:
        """Every factory `plan` needs, compiling those not seen before (call with `lock` held)."""
        functions = (*plan.functions, *((plan.lets,) if plan.lets else ()))
        new = [f.text for f in functions if f.text not in self.known]
        if new:
            self.known.update(_compile(new))
        return self.known


def instantiate(
    decl: PipelineDecl,
    plan: PipelinePlan,
    factories: dict[str, Generated],
    fallbacks: tuple[Callable[..., object], ...],
) -> CompiledPipeline:
    """A pipeline's closures from compiled factories, with its constants and defaults.

    `fallbacks[k]` receives `(stage, unknown_kwargs, values, guard)` when the checked entry for
    field `k` (iterations, memory, time) meets anything irregular; `guard` is NO_POSITIONAL unless
    params were passed by position.
    """
    defaults = tuple(p.default for p in decl.params)
    *plain, checked_plan = plan.functions
    shared = None if plan.lets is None else _build(plan.lets, factories, None)
    built = [_build(f, factories, shared) for f in plain]
    n, m = len(decl.stages), len(decl.contracts)
    fields = tuple(tuple(built[3 * s : 3 * s + 3]) for s in range(n))
    contracts = tuple(built[3 * n + 2 : 3 * n + 2 + m])
    terms, time_terms = [], []
    start = 3 * n + 2 + m  # then each stage's memory terms, stage by stage, then its time terms
    for st in decl.stages:
        terms.append(tuple(built[start : start + len(st.memory_terms)]))
        start += len(st.memory_terms)
    for st in decl.stages:
        time_terms.append(tuple(built[start : start + len(st.time_terms)]))
        start += len(st.time_terms)
    calls = built[start] if decl.calls else None
    start += bool(decl.calls)
    every = built[start]
    assert start + 1 == len(built)
    tables = [{st.name: fields[s][k] for s, st in enumerate(decl.stages)} for k in range(3)]
    integral = (int if plan.rational else None, None, None)  # int-typed code yields ints itself
    names = tuple(p.name for p in decl.params)
    make_checked = factories[checked_plan.text]
    consts = checked_plan.consts
    checked = tuple(
        rename(make_checked(consts, defaults, contracts, tables[k], fallbacks[k], integral[k]),
               names, FIELD_NAMES[k])
        for k in range(3)
    )  # fmt: skip
    ordered = (*((plan.lets,) if plan.lets else ()), *plan.functions)
    source = "".join(f.text.replace("{name}", f.role, 1) for f in ordered)
    admissible = built[3 * n + 1] if m else None
    iterations = built[3 * n]
    return CompiledPipeline(
        fields,
        iterations,
        admissible,
        contracts,
        checked,
        source,
        tuple(terms),
        calls,
        every,
        tuple(time_terms),
    )


def _build(f: FunctionPlan, factories: dict[str, Generated], lets: Generated | None) -> Generated:
    """One closure: the plain function itself, or its factory called with what it needs."""
    if not f.factory:
        return factories[f.text]
    made: Generated = factories[f.text](f.consts, lets) if f.lets else factories[f.text](f.consts)
    return made


def compile_pipeline(
    decl: PipelineDecl, fallbacks: tuple[Callable[..., object], ...], **layout: int
) -> CompiledPipeline:
    """Plan, compile and instantiate one pipeline on its own (a book compiles all at once);
    `layout` passes `inline_nodes` and `positional` on to plan_pipeline."""
    plan = plan_pipeline(decl, **layout)
    return instantiate(decl, plan, compile_plans([plan]), fallbacks)


class _NoPositional:
    """Default of a checked entry's guard parameter: anything else means params came by position."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<params are keyword-only>"


NO_POSITIONAL = _NoPositional()


def rename(
    fn: Callable[..., object], param_names: tuple[str, ...], name: str
) -> Callable[..., object]:
    """Give a checked entry the params' real names as keyword parameters, so CPython binds
    `steps=4` itself. Only the code object's variable *names* change (locals are read by index),
    so no text from the file is ever compiled; plain locals get names no identifier can take."""
    code = fn.__code__
    assert code.co_kwonlyargcount == 0 and not code.co_cellvars  # only names change below
    mapping = {f"p{i}": pname for i, pname in enumerate(param_names)}
    mapping["_s"] = _fresh("stage", param_names)
    mapping["_kw"] = _fresh("params", param_names)
    mapping["_x"] = _fresh("_", param_names)
    varnames = tuple(mapping.get(v, f"<{v}>") for v in code.co_varnames)
    renamed = types.FunctionType(
        code.replace(co_varnames=varnames, co_name=name, co_qualname=f"Pipeline.{name}")
        if hasattr(code, "co_qualname")
        else code.replace(co_varnames=varnames, co_name=name),
        fn.__globals__,
        name,
        fn.__defaults__,
        fn.__closure__,
    )
    kwdefaults = fn.__kwdefaults__
    renamed.__kwdefaults__ = {mapping[k]: v for k, v in kwdefaults.items()} if kwdefaults else None
    renamed.__qualname__ = f"Pipeline.{name}"
    return renamed


def _fresh(base: str, taken: tuple[str, ...]) -> str:
    """`base`, or `base_`, `base__`...: a parameter name that no param of the pipeline uses."""
    while base in taken:
        base += "_"
    return base
