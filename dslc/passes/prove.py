"""The prover: iterations are non-negative integers, measures non-negative, no divisor is ever zero.

Each property of each stage field (and each divisor in a field, let or contract) is an obligation,
settled by the cheapest means that works, over the admissible domain:

1. interval arithmetic over the contract-narrowed ranges, refined by `if` conditions and `and`/`or`
   short-circuits, then by splitting ranges (branch and bound); integer typing and residues for
   integrality; a guard that says `d != 0` for its divisor;
2. a counterexample search over telling candidate points; a violation found is an error naming an
   admissible point, re-checked with the interpreter before it is reported;
3. every point, when the params involved span at most EXHAUSTIVE_POINTS points (a proof);
4. sympy under a time budget (`dslc.passes.symbolic`, imported only when needed);
5. otherwise an `unproven` warning.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from fractions import Fraction

import attrs

from dslc import ast
from dslc.diagnostics import Diagnostic, error, warning
from dslc.fmt import format_expr
from dslc.interp import EvalError, Interpreter
from dslc.limits import PROVER_SECONDS
from dslc.model import ResolvedPipeline
from dslc.passes.context import Context
from dslc.passes.intervals import Env, Interval
from dslc.passes.residues import prove_integer
from dslc.passes.search import all_points, candidate_values, domain_size, heuristic_points, random_points
from dslc.passes.split import excludes_zero, holds_everywhere, nonnegative
from dslc.passes.types import TypeChecker

EXHAUSTIVE_POINTS = 5000
SEARCH_POINTS = 2000
RANDOM_POINTS = 200
SNAP_STEPS = 64  # how far a reported counterexample creeps towards the default
WORK = 250_000  # nodes evaluated per pipeline by splitting (weighing 5) and search: about a second
SYMBOLIC_SECONDS = 8 * PROVER_SECONDS  # sympy per pipeline, all formulas together


class _OutOfWork(Exception):
    pass

INTEGER, NONNEG, DIVISOR = "integer", "nonneg", "divisor"


@attrs.define(eq=False)
class Obligation:
    kind: str
    expr: ast.Expr  # the whole expression evaluated: a field's value, a let's value, a contract
    node: ast.Expr  # the culprit: the field's value, or the division
    what: str  # "'iterations' of stage 'X'", "let 'r'", "the contract of 'steps'"
    facts: tuple[tuple[ast.Expr, bool], ...] = ()  # conditions under which a division happens
    contract: int | None = None  # index of the contract a division lies in
    proved: bool = False
    refuted: tuple[dict, object] | None = None  # (point, value or EvalError)

    @property
    def open(self) -> bool:
        return not self.proved and self.refuted is None


def check_properties(pipeline: ResolvedPipeline, *, exhaustive: int = EXHAUSTIVE_POINTS,
                     symbolic: bool = True) -> list[Diagnostic]:
    """Every property of LANGUAGE.md's "What the compiler proves" for one pipeline."""
    return Prover(pipeline, exhaustive=exhaustive, symbolic=symbolic).run()


class Prover:
    def __init__(self, pipeline: ResolvedPipeline, *, exhaustive: int = EXHAUSTIVE_POINTS, symbolic: bool = True):
        self.pipeline = pipeline
        self.ctx = Context(pipeline)
        self.exhaustive = exhaustive
        self.symbolic = symbolic
        self.rng = random.Random(f"dslc-prove:{pipeline.name}")
        self.results: list[Obligation] = []  # after run(): every obligation and how it ended
        self.searched = False  # after run(): whether any obligation needed more than the cheap path
        self.work = WORK  # evaluations left (each let or expression evaluated counts one)

    # -- obligations --------------------------------------------------------------------------

    def obligations(self) -> list[Obligation]:
        out: list[Obligation] = []
        for index, (param, where) in enumerate(self.pipeline.contracts):
            out += self._divisions(where, f"the contract of '{param.name}'", index)
        for let in self.pipeline.lets:
            out += self._divisions(let.value, f"let '{let.name}'", None)
        for stage in self.pipeline.stages:
            for name in ast.FIELDS:
                field = stage.fields.get(name)
                if field is None:
                    continue
                what = f"'{name}' of stage '{stage.name}'{self._inherited(field)}"
                if name == "iterations":
                    out.append(Obligation(INTEGER, field.value, field.value, what))
                out.append(Obligation(NONNEG, field.value, field.value, what))
                out += self._divisions(field.value, what, None)
        return out

    def _inherited(self, field: ast.Field) -> str:
        outer, inner = self.pipeline.span, field.span
        if outer is None or inner is None:
            return ""
        inside = outer.source.name == inner.source.name and \
            (outer.line, outer.column) <= (inner.line, inner.column) <= (outer.end_line, outer.end_column)
        return "" if inside else f" in pipeline '{self.pipeline.name}'"

    def _divisions(self, expr: ast.Expr, what: str, contract: int | None) -> list[Obligation]:
        out = []
        stack: list[tuple[ast.Expr, tuple[tuple[ast.Expr, bool], ...]]] = [(expr, ())]
        while stack:
            node, facts = stack.pop()
            if isinstance(node, ast.IfElse):
                stack += [(node.orelse, facts + ((node.cond, False),)), (node.then, facts + ((node.cond, True),)),
                          (node.cond, facts)]
                continue
            if isinstance(node, ast.Binary) and node.op in ("and", "or"):
                stack += [(node.right, facts + ((node.left, node.op == "and"),)), (node.left, facts)]
                continue
            if isinstance(node, ast.Binary) and node.op in ("/", "//", "%"):
                divisor = self.ctx.constant(node.right)
                if not (isinstance(divisor, Fraction) and divisor != 0):
                    out.append(Obligation(DIVISOR, expr, node, what, facts, contract))
            stack += [(child, facts) for child in reversed(ast.children(node))]
        return out

    # -- the cheap path -----------------------------------------------------------------------

    def _constrain(self, ob: Obligation) -> Callable[[Env], Env | None]:
        """Refine an environment by the contracts in force and the conditions a division sits under."""
        contracts = self.ctx.contracts if ob.contract is None else self.ctx.contracts[:ob.contract]
        facts = [(where, True) for where in contracts] + list(ob.facts)

        def constrain(env: Env | None) -> Env | None:
            for cond, truth in facts:
                if env is None:
                    return None
                env = env.refine(cond, truth)
            return env

        return constrain

    def cheap(self, ob: Obligation) -> bool:
        ctx = self.ctx
        if ob.kind == INTEGER:
            value = ctx.interval(ob.expr)
            if isinstance(value, Interval) and value.integer:
                return True
            if TypeChecker(self.pipeline.types).infer(ob.expr) == "int":
                return True
            return prove_integer(ctx, ob.expr, ctx.atoms)
        if ob.kind == DIVISOR:
            assert isinstance(ob.node, ast.Binary)
            target, good = ob.node.right, excludes_zero
            if _guarded(target, ob.facts):
                return True
        else:
            target, good = ob.expr, nonnegative
        if ob.contract is None:
            env: Env | None = ctx.env
            for cond, truth in ob.facts:
                env = env.refine(cond, truth) if env is not None else None
            if env is None or good(ctx.interval(target) if env is ctx.env else env.eval(target)):
                return True
        start = ctx.domains if ob.contract is None else ctx.box
        names = [n for n in ctx.ordered(ctx.deps(target)) if ctx.param_types[n] == "int"]
        cost = 5 * (_nodes(target) + sum(_nodes(let.value) for let in ctx.needed_lets(target)))
        return holds_everywhere(start, self._constrain(ob), ctx.new_env, target, names, good,
                                lambda: self._spend(cost))

    def _spend(self, cost: int) -> bool:
        """Take `cost` from the pipeline's work budget; False once it is gone."""
        self.work -= cost
        return self.work >= 0

    # -- search -------------------------------------------------------------------------------

    def search(self, obs: list[Obligation]) -> None:
        for in_contracts in (False, True):
            group = [ob for ob in obs if (ob.contract is not None) == in_contracts and ob.open]
            if group:
                try:
                    self._search_group(group, in_contracts)
                except _OutOfWork:
                    return

    def _relevant(self, group: list[Obligation], in_contracts: bool) -> list[str]:
        names: set[str] = set()
        for ob in group:
            names |= self.ctx.deps(ob.expr)
        limit = max((ob.contract for ob in group if ob.contract is not None), default=len(self.ctx.contracts))
        contracts = [self.ctx.deps(where) for where in self.ctx.contracts[:limit]]
        grown = True
        while grown:
            grown = False
            for deps in contracts:
                if deps & names and not deps <= names:
                    names |= deps
                    grown = True
        return self.ctx.ordered(frozenset(names))

    def _search_group(self, group: list[Obligation], in_contracts: bool) -> None:
        ctx = self.ctx
        relevant = self._relevant(group, in_contracts)
        domains = ctx.box if in_contracts else ctx.domains
        oks = {} if in_contracts else {name: ctx.admits(name) for name in relevant}
        params = [ctx.params[name] for name in relevant]
        defaults = [int(ctx.default[p.name]) for p in params if p.type == "int"]
        values = {p.name: candidate_values(p, domains[p.name], oks.get(p.name),
                                           [d for d in defaults if d != ctx.default[p.name]], self.rng)
                  for p in params}
        base = dict(ctx.default)
        points: Iterator[dict] = heuristic_points(base, relevant, values, self.rng, SEARCH_POINTS)
        if self._examine_all(group, points):
            return
        self._examine_all(group, random_points(base, params, domains, oks, self.rng, RANDOM_POINTS))
        size = domain_size(params, domains)
        if size is not None and size <= self.exhaustive:
            if not self._examine_all(group, all_points(base, params, domains)):
                for ob in group:
                    if ob.open:
                        ob.proved = True

    def _examine_all(self, group: list[Obligation], points: Iterator[dict]) -> bool:
        """Evaluate open obligations at each point; True once none is open."""
        lets: dict[str, ast.Let] = {}
        for expr in self.ctx.contracts + [ob.expr for ob in group]:
            for let in self.ctx.needed_lets(expr):
                lets[let.name] = let
        ordered = tuple(let for let in self.pipeline.lets if let.name in lets)
        base = sum(_nodes(let.value) for let in ordered) + sum(_nodes(c) for c in self.ctx.contracts)
        sizes = {id(ob.expr): _nodes(ob.expr) for ob in group}
        for point in points:
            open_exprs = {id(ob.expr) for ob in group if ob.open}
            if not open_exprs:
                return True
            if not self._spend(base + sum(sizes[key] for key in open_exprs)):
                raise _OutOfWork
            self._examine(point, group, ordered)
        return not any(ob.open for ob in group)

    def _examine(self, point: dict, group: list[Obligation], lets: tuple[ast.Let, ...]) -> None:
        interp = Interpreter(point, lets)
        prefix, failure = _admissible_prefix(interp, self.ctx.contracts)
        results: dict[int, object] = {}
        for ob in group:
            if not ob.open:
                continue
            if ob.contract is not None:
                if prefix == ob.contract and isinstance(failure, EvalError) and failure.node is ob.node:
                    ob.refuted = (point, failure)
                continue
            if prefix < len(self.ctx.contracts):
                continue
            key = id(ob.expr)
            if key not in results:
                try:
                    results[key] = interp.eval(ob.expr)
                except EvalError as exc:
                    results[key] = exc
            if _violates(ob, results[key]):
                ob.refuted = (point, results[key])

    def violates_at(self, ob: Obligation, point: dict) -> object | None:
        """Check from scratch that `point` is admissible (as `ob` needs) and violates `ob`: the value
        or error that shows it, else None."""
        for p in self.pipeline.params:
            value = point[p.name]
            if p.type == "bool":
                if not isinstance(value, bool):
                    return None
            elif isinstance(value, bool) or value.denominator != 1 or value < p.lo or \
                    (p.hi is not None and value > p.hi):
                return None
        interp = Interpreter(point, self.pipeline.lets)
        prefix, failure = _admissible_prefix(interp, self.ctx.contracts)
        if ob.contract is not None:
            found = prefix == ob.contract and isinstance(failure, EvalError) and failure.node is ob.node
            return failure if found else None
        if prefix < len(self.ctx.contracts):
            return None
        try:
            result: object = interp.eval(ob.expr)
        except EvalError as exc:
            result = exc
        return result if _violates(ob, result) else None

    def shrink(self, ob: Obligation) -> None:
        """Move a counterexample's params, one at a time, to the violating value nearest the default."""
        assert ob.refuted is not None
        point, result = ob.refuted
        for name in self.ctx.ordered(self.ctx.deps(ob.expr)):
            good, bad = self.ctx.default[name], point[name]
            if isinstance(bad, bool) or good == bad:
                continue
            found = self.violates_at(ob, {**point, name: good})
            if found is not None:
                point, result = {**point, name: good}, found
                continue
            for _ in range(128):
                if abs(bad - good) <= 1:
                    break
                mid = Fraction((good + bad) // 2)
                found = self.violates_at(ob, {**point, name: mid})
                if found is None:
                    good = mid
                else:
                    bad, point, result = mid, {**point, name: mid}, found
            point, result = self._creep(ob, name, point, result, self.ctx.default[name])
        ob.refuted = (point, result)

    def _creep(self, ob: Obligation, name: str, point: dict, result: object, good: Fraction) -> tuple[dict, object]:
        """Step from a violating value towards `good` over the param's own admissible values (which
        bisection jumps over) while they still violate: `frames = 25`, not 21, under `frames % 4 == 1`."""
        ok = self.ctx.admits(name)
        bad = point[name]
        step = 1 if good > bad else -1
        value = bad + step
        for _ in range(SNAP_STEPS):
            if value == good:
                break
            if ok is None or ok(int(value)):
                found = self.violates_at(ob, {**point, name: value})
                if found is None:
                    break
                point, result = {**point, name: value}, found
            value += step
        return point, result

    # -- driver -------------------------------------------------------------------------------

    def run(self) -> list[Diagnostic]:
        obs = self.obligations()
        pending = [ob for ob in obs if not self.cheap(ob)]
        self.results, self.searched = obs, bool(pending)
        for ob in obs:
            ob.proved = ob not in pending
        if pending:
            self.search(pending)
        still = [ob for ob in pending if ob.open]
        if still and self.symbolic:
            from dslc.passes.symbolic import prove_symbolically  # sympy: only when needed

            deadline = time.monotonic() + SYMBOLIC_SECONDS
            for ob in still:
                if time.monotonic() > deadline:
                    break
                ob.proved = prove_symbolically(self.ctx, ob)
        diagnostics = []
        for ob in pending:
            if ob.refuted is not None and self.violates_at(ob, ob.refuted[0]) is not None:
                self.shrink(ob)
                diagnostics.append(self._refuted(ob))
            elif not ob.proved:
                diagnostics.append(self._unproven(ob))
        return sorted(diagnostics, key=lambda d: d.sort_key())

    def _point(self, ob: Obligation) -> str:
        assert ob.refuted is not None
        point = ob.refuted[0]
        names = self.ctx.ordered(self.ctx.deps(ob.expr))
        shown = ", ".join(f"{n} = {_show(point[n])}" for n in names)
        return f" at {shown}" if shown else ""

    def _refuted(self, ob: Obligation) -> Diagnostic:
        assert ob.refuted is not None
        where = self._point(ob)
        if ob.kind == DIVISOR:
            assert isinstance(ob.node, ast.Binary)
            what = "modulo" if ob.node.op == "%" else "division"
            divisor = format_expr(ob.node.right)
            return error("division-by-zero", f"{what} by zero in {ob.what}{where}", ob.node.right.span,
                         hints=[f"guard it with 'if {divisor} != 0 then ... else ...', or exclude such "
                                f"workloads with a range or a 'where' contract"])
        value = ob.refuted[1]
        said = f"{ob.what} is {value}{where}" if where else f"{ob.what} is always {value}"
        if ob.kind == NONNEG:
            return error("negative", said, ob.node.span,
                         hints=["clamp it with 'max(0, ...)', or exclude such workloads with a range or a "
                                "'where' contract"])
        return error("non-integer", said, ob.node.span,
                     hints=["round it with '//', floor() or ceil(), or exclude such workloads with a "
                            "'where' contract"])

    def _unproven(self, ob: Obligation) -> Diagnostic:
        if ob.kind == DIVISOR:
            assert isinstance(ob.node, ast.Binary)
            divisor = format_expr(ob.node.right)
            return warning("unproven", f"cannot prove that '{divisor}' is never zero in {ob.what}",
                           ob.node.right.span,
                           hints=[f"guard it with 'if {divisor} != 0 then ... else ...', or keep it away "
                                  f"from zero with a range or a 'where' contract"])
        if ob.kind == NONNEG:
            return warning("unproven", f"cannot prove that {ob.what} is >= 0", ob.node.span,
                           hints=["give its params a range or a 'where' contract that keeps it >= 0, or "
                                  "write 'max(0, ...)'"])
        return warning("unproven", f"cannot prove that {ob.what} is an integer", ob.node.span,
                       hints=["round it with '//', floor() or ceil(), or add a 'where' contract that "
                              "makes it whole"])


def _nodes(expr: ast.Expr) -> int:
    return len(ast.walk(expr))


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _admissible_prefix(interp: Interpreter, contracts: list[ast.Expr]) -> tuple[int, object]:
    """How many contracts hold in order, and why the next one does not (False or an EvalError)."""
    for index, where in enumerate(contracts):
        try:
            holds = interp.eval(where)
        except EvalError as exc:
            return index, exc
        if holds is not True:
            return index, holds
    return len(contracts), None


def _violates(ob: Obligation, result: object) -> bool:
    if ob.kind == DIVISOR:
        return isinstance(result, EvalError) and result.node is ob.node
    if not isinstance(result, Fraction):
        return False
    return result < 0 if ob.kind == NONNEG else result.denominator != 1


def _guarded(divisor: ast.Expr, facts: tuple[tuple[ast.Expr, bool], ...]) -> bool:
    """A condition in force says `divisor != 0` (or `> 0`, `< 0`, ...) about this very expression."""
    stack = list(facts)
    while stack:
        cond, truth = stack.pop()
        if isinstance(cond, ast.Unary) and cond.op == "not":
            stack.append((cond.operand, not truth))
            continue
        if not isinstance(cond, ast.Binary):
            continue
        if cond.op in ("and", "or"):
            if truth == (cond.op == "and"):
                stack += [(cond.left, truth), (cond.right, truth)]
            continue
        if cond.op not in ast.COMPARISONS:
            continue
        op = cond.op if truth else _NEGATE[cond.op]
        for side, other, flip in ((cond.left, cond.right, False), (cond.right, cond.left, True)):
            if side != divisor or not isinstance(other, ast.Num):
                continue
            c = other.value
            op2 = _FLIP[op] if flip else op
            if (op2 == "!=" and c == 0) or (op2 == "==" and c != 0) or (op2 == ">" and c >= 0) or \
                    (op2 == ">=" and c > 0) or (op2 == "<" and c <= 0) or (op2 == "<=" and c < 0):
                return True
    return False


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
