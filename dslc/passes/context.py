"""What the prover knows about one pipeline before proving anything: dependencies, ranges,
contracts.

Each int param's range is narrowed by every contract (as interval facts) and then by its own
single-param contracts, scanning a bounded window from each end for the first admissible value:
`frames in [1, 1021] where frames % 4 == 1` stays [1, 1021], `x in [0, 100] where x % 8 == 3`
becomes [3, 99]. Every narrowing keeps all admissible values, so proofs over it stay sound.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from fractions import Fraction

from dslc import ast
from dslc.interp import EvalError, Interpreter, Value
from dslc.model import ResolvedParam, ResolvedPipeline
from dslc.passes.intervals import BOTH, INF, Abstract, Env, Interval

SCAN_WINDOW = 1024  # values tried from each end of a range for its first admissible value
WORK_SECONDS = 3.0  # a safety net on the search work per pipeline (its own budgets normally end it)


class OutOfTime(Exception):
    """The pipeline's time for search work is spent (only pathological formulas get here)."""


#: The names each expression refers to (`ast.names`), by the expression's id, the expression kept
#: alive beside them: a fact of the node alone, so pipelines that share it (a parent's members
#: inherited) can share this too.
Names = dict[int, tuple[ast.Expr, frozenset[str]]]


class Context:
    def __init__(self, pipeline: ResolvedPipeline, names: Names | None = None):
        self.pipeline = pipeline
        self._names: Names = {} if names is None else names
        self.deadline = time.monotonic() + WORK_SECONDS
        self.params: dict[str, ResolvedParam] = {p.name: p for p in pipeline.params}
        self.param_types = {p.name: p.type for p in pipeline.params}
        self.let_exprs = {let.name: let.value for let in pipeline.lets}
        self.let_index = {let.name: i for i, let in enumerate(pipeline.lets)}
        self._lets = pipeline.lets
        self._let_params: dict[str, frozenset[str]] = {}
        self._let_lets: dict[str, frozenset[str]] = {}
        for let in pipeline.lets:  # dependency order
            params, lets = self._direct(let.value)
            self._let_params[let.name] = params
            self._let_lets[let.name] = lets
        self.let_needs = {
            name: tuple(sorted(lets, key=self.let_index.__getitem__))
            for name, lets in self._let_lets.items()
        }
        self._sizes: dict[str, int] | None = None
        self._reads: dict[int, tuple[ast.Expr, tuple[tuple[str, int], ...]]] = {}
        self._intervals: dict[int, tuple[ast.Expr, Abstract]] = {}
        self.default: dict[str, Fraction | bool] = {
            p.name: bool(p.default) if p.type == "bool" else Fraction(p.default)
            for p in pipeline.params
        }
        self.contracts = [where for _, where in pipeline.contracts]
        self.box: dict[str, Abstract] = {p.name: _range(p) for p in pipeline.params}
        self._single: dict[str, list[ast.Expr]] = {}
        for where in self.contracts:
            deps = self.deps(where)
            if len(deps) == 1:
                (name,) = deps
                self._single.setdefault(name, []).append(where)
        self.domains = self._narrow_domains()
        env = self.new_env(self.domains)
        for where in self.contracts:
            env = env.refine(where, True) or env
        self.env = env

    # -- dependencies -------------------------------------------------------------------------

    def _direct(self, expr: ast.Expr) -> tuple[frozenset[str], frozenset[str]]:
        params: set[str] = set()
        lets: set[str] = set()
        known = self._names.get(id(expr))
        if known is None:
            known = self._names[id(expr)] = (expr, frozenset(n.id for n in ast.names(expr)))
        for name in known[1]:
            if name in self.params:
                params.add(name)
            elif name in self._let_params:
                params |= self._let_params[name]
                lets |= self._let_lets[name] | {name}
        return frozenset(params), frozenset(lets)

    def deps(self, expr: ast.Expr) -> frozenset[str]:
        """The params `expr` depends on, through lets."""
        return self._direct(expr)[0]

    def ordered(self, names: frozenset[str]) -> list[str]:
        """Param names in declaration order."""
        return [p.name for p in self.pipeline.params if p.name in names]

    def needed_lets(self, expr: ast.Expr) -> tuple[ast.Let, ...]:
        """The lets `expr` uses, directly or not, in dependency order."""
        order = self.let_index  # sorting the few it uses, not scanning every let of the pipeline
        return tuple(
            self._lets[order[name]] for name in sorted(self._direct(expr)[1], key=order.__getitem__)
        )

    def lets_read(self, expr: ast.Expr) -> tuple[tuple[str, int], ...]:
        """The lets `expr` reads, directly or not, each by name and definition (its node's id: an
        inherited let is the parent's own node), in dependency order: with the params' ranges and
        contracts, all a fact about `expr` can depend on. Memoized per node."""
        key = id(expr)
        if key not in self._reads:
            reads = tuple((let.name, id(let.value)) for let in self.needed_lets(expr))
            self._reads[key] = (expr, reads)  # the node is kept alive with its id
        return self._reads[key][1]

    def size(self, expr: ast.Expr) -> int:
        """The node count of `expr` with lets inlined (bounds symbolic work)."""
        if self._sizes is None:
            self._sizes = {}
            for let in self.pipeline.lets:  # dependency order: no recursion
                self._sizes[let.name] = self._count(let.value)
        return self._count(expr)

    def _count(self, expr: ast.Expr) -> int:
        assert self._sizes is not None
        return sum(
            1 + (self._sizes.get(node.id, 0) if isinstance(node, ast.Name) else 0)
            for node in ast.walk(expr)
        )

    # -- values ---------------------------------------------------------------------------------

    def constant(self, expr: ast.Expr) -> Value | None:
        """The value of a param-free expression (None when it has params or fails)."""
        if self.deps(expr):
            return None
        try:
            return Interpreter({}, self.needed_lets(expr)).eval(expr)
        except EvalError:
            return None

    def new_env(self, params: Mapping[str, Abstract]) -> Env:
        return Env(params, self.let_exprs, None, self.let_needs)

    def interval(self, expr: ast.Expr) -> Abstract:
        """The abstract value of `expr` over the whole domain (memoized per node)."""
        key = id(expr)
        if key not in self._intervals:
            self._intervals[key] = (expr, self.env.eval(expr))  # the node is kept alive with its id
        return self._intervals[key][1]

    def admits(self, name: str) -> Callable[[int], bool] | None:
        """A test of one value of `name` against the contracts that name it alone (None: there are
        none).
        """
        contracts = self._single.get(name)
        if not contracts:
            return None
        lets = tuple(let for c in contracts for let in self.needed_lets(c))
        lets = tuple(
            {
                let.name: let for let in sorted(lets, key=lambda let: self.let_index[let.name])
            }.values()
        )

        def ok(value: int) -> bool:
            if time.monotonic() > self.deadline:
                raise OutOfTime
            interp = Interpreter({name: Fraction(value)}, lets)
            try:
                return all(interp.eval(c) is True for c in contracts)
            except EvalError:
                return False

        return ok

    def _narrow_domains(self) -> dict[str, Abstract]:
        env = self.new_env(self.box)
        for where in self.contracts:
            env = env.refine(where, True) or env
        domains = dict(self.box)
        for name, value in env.params.items():
            if isinstance(value, Interval) or isinstance(value, frozenset) and value:
                domains[name] = value
        for name in self._single:
            domain, ok = domains[name], self.admits(name)
            if not isinstance(domain, Interval) or ok is None:
                continue
            hi = domain.hi
            try:
                lo = _first(ok, int(domain.lo), 1, None if isinstance(hi, float) else int(hi))
                if not isinstance(hi, float):
                    hi = Fraction(_first(ok, int(hi), -1, lo))
            except OutOfTime:
                continue
            domains[name] = Interval(Fraction(lo), hi, True)
        return domains


def _range(param: ResolvedParam) -> Abstract:
    if param.type == "bool":
        return BOTH
    lo = Fraction(param.lo if param.lo is not None else 0)
    return Interval(lo, INF if param.hi is None else Fraction(param.hi), True)


def _first(ok: Callable[[int], bool], start: int, step: int, stop: int | None) -> int:
    """The first value from `start` (towards `stop`, within the window) that `ok` admits; else
    `start`.
    """
    value = start
    for _ in range(SCAN_WINDOW):
        if stop is not None and (value - stop) * step > 0:
            return start
        if ok(value):
            return value
        value += step
    return start
