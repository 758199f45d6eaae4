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

import functools
import random
import time
from collections.abc import Callable, Iterator
from fractions import Fraction

from artifact.spelling import proof_value
from dslc import ast
from dslc.diagnostics import Diagnostic
from dslc.interp import EvalError, Interpreter
from dslc.limits import PROVER_SECONDS
from dslc.model import ResolvedPipeline
from dslc.passes.context import Context, Names, OutOfTime
from dslc.passes.intervals import Env, Interval
from dslc.passes.obligations import (
    DIVISOR,
    INTEGER,
    Obligation,
    Sites,
    admissible_prefix,
    collect,
    guarded,
    violates,
)
from dslc.passes.prove_messages import over_budget, refuted, unproven
from dslc.passes.residues import periodic_atoms, prove_integer
from dslc.passes.search import (
    all_points,
    candidate_values,
    domain_size,
    heuristic_points,
    random_points,
)
from dslc.passes.split import excludes_zero, holds_everywhere, nonnegative
from dslc.passes.types import TypeChecker

EXHAUSTIVE_POINTS = 5000  # a box of the params involved this small is checked point by point
SEARCH_POINTS = 2000  # candidate points (the product of interesting values, sampled past this)
RANDOM_POINTS = 200  # then points drawn at random
SNAP_STEPS = 64  # how far a reported counterexample creeps towards the default
SHRINK_SECONDS = 1.0  # a safety net on moving one counterexample towards the default
WORK = 250_000  # nodes evaluated per pipeline by splitting (weighing 5) and search: about a second
SYMBOLIC_SECONDS = 8 * PROVER_SECONDS  # sympy per pipeline, all formulas together
FILE_WORK = 40 * WORK  # nodes evaluated for all the pipelines of one file (a `limit` beyond)


def check_properties(
    pipeline: ResolvedPipeline,
    *,
    exhaustive: int = EXHAUSTIVE_POINTS,
    symbolic: bool = True,
    proofs: ProofCache | None = None,
) -> list[Diagnostic]:
    """Every property of docs/language.md's "What the compiler proves" for one pipeline; `proofs`,
    shared by a compilation, settles what another pipeline (a parent) already settled."""
    return Prover(pipeline, exhaustive=exhaustive, symbolic=symbolic, proofs=proofs).run()


class ProofCache:
    """Obligations settled in one compilation, and the prover's work budget for each file.

    An obligation's outcome depends on its expression, its culprit, the conditions it sits under,
    the params' types, ranges and contracts, and the lets it (or a contract) reads, directly or
    not, never on defaults, on the pipeline's name or on lets it does not read: so a child pipeline
    re-proves only the fields it adds or overrides, or whose inputs (a range, a contract, a let it
    reads) it changed, and checking an inheritance chain costs what its new members cost.
    """

    def __init__(self, work_per_file: int = FILE_WORK) -> None:
        self.outcomes: dict[object, tuple[bool, tuple[dict, object] | None]] = {}
        self.settings: dict[object, int] = {}  # a pipeline's params and contracts -> a number
        self.work_per_file = work_per_file
        self.spent: dict[str, int] = {}  # source file name -> prover work spent on its pipelines
        self.sites: Sites = {}  # (formula, the lets it reads) -> its divisions (obligations)
        self.names: Names = {}  # formula -> the names it refers to
        self.misses = 0  # obligations settled afresh (not found here): the prover's work, counted
        self._alive: dict[int, ast.Expr] = {}  # keeps every node whose id is in a key alive

    def key(self, pipeline: ResolvedPipeline) -> int:
        """A number for what every obligation of the pipeline depends on besides its own expression
        and the lets it reads: params' types and ranges, contracts in order."""
        params = tuple((p.name, p.type, p.lo, p.hi) for p in pipeline.params)
        contracts = tuple((p.name, where) for p, where in pipeline.contracts)
        return self.settings.setdefault((params, contracts), len(self.settings))

    def keep(self, *nodes: ast.Expr) -> None:
        """Keep `nodes` alive as long as the cache, so that their ids in keys stay theirs."""
        for node in nodes:
            self._alive.setdefault(id(node), node)

    def left(self, pipeline: ResolvedPipeline) -> int:
        """Work left for the file that declares `pipeline`."""
        return self.work_per_file - self.spent.get(_file(pipeline), 0)

    def spend(self, pipeline: ResolvedPipeline, work: int) -> None:
        """Charge the file that declares `pipeline`."""
        self.spent[_file(pipeline)] = self.spent.get(_file(pipeline), 0) + work


def _file(pipeline: ResolvedPipeline) -> str:
    """The name of the file that declares `pipeline`."""
    span = pipeline.span
    return span.source.name if span is not None else ""


def _key(ob: Obligation, settings: int, lets: object) -> object:
    """An obligation's cache key. Its expressions count by identity: an inherited field is the
    parent's own node (an overridden one is a new node, so it is proved again); `lets` names the
    definitions of the lets it and the contracts read (`Context.lets_read`)."""
    facts = tuple((id(cond), truth) for cond, truth in ob.facts)
    return (ob.kind, id(ob.expr), id(ob.node), facts, ob.contract, settings, lets)


class Prover:
    """Settles every obligation of one pipeline; `exhaustive` and `symbolic` let tests turn steps
    off.
    """

    def __init__(
        self,
        pipeline: ResolvedPipeline,
        *,
        exhaustive: int = EXHAUSTIVE_POINTS,
        symbolic: bool = True,
        proofs: ProofCache | None = None,
    ):
        self.pipeline = pipeline
        self.proofs = proofs
        self.ctx = Context(pipeline, proofs.names if proofs is not None else None)
        self.exhaustive = exhaustive
        self.symbolic = symbolic
        self.rng = random.Random(f"dslc-prove:{pipeline.name}")
        self.results: list[Obligation] = []  # after run(): every obligation and how it ended
        self.searched = False  # after run(): whether any obligation needed more than the cheap path
        self.work = WORK  # AST nodes left to evaluate in splitting and search

    @functools.cached_property
    def atoms(self) -> dict[str, list[tuple[int, ast.Expr]]]:
        """The contracts' periodic conjuncts per param (`E % m CMP c`), for integrality proofs;
        found once the context is whole, and only when an obligation needs them."""
        return periodic_atoms(self.ctx, self.ctx.contracts)

    # -- the cheap path -----------------------------------------------------------------------

    def _constrain(self, ob: Obligation) -> Callable[[Env], Env | None]:
        """Refine an environment by the contracts in force and the conditions a division sits
        under.
        """
        contracts = self.ctx.contracts if ob.contract is None else self.ctx.contracts[: ob.contract]
        facts = [(where, True) for where in contracts] + list(ob.facts)

        def constrain(env: Env | None) -> Env | None:
            for cond, truth in facts:
                if env is None:
                    return None
                env = env.refine(cond, truth)
            return env

        return constrain

    def cheap(self, ob: Obligation) -> bool:
        """Prove an obligation without search or sympy: types, residues, intervals, splitting."""
        ctx = self.ctx
        if ob.kind == INTEGER:
            value = ctx.interval(ob.expr)
            if isinstance(value, Interval) and value.integer:
                return True
            if TypeChecker(self.pipeline.types).infer(ob.expr) == "int":
                return True
            try:
                return prove_integer(ctx, ob.expr, self.atoms)
            except OutOfTime:
                return False
        if ob.kind == DIVISOR:
            assert isinstance(ob.node, ast.Binary)
            target, good = ob.node.right, excludes_zero
            if guarded(target, ob.facts):
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
        return holds_everywhere(
            start, self._constrain(ob), ctx.new_env, target, names, good, lambda: self._spend(cost)
        )

    def _spend(self, cost: int) -> bool:
        """Take `cost` from the pipeline's work budget; False once it is gone (or the time is: a
        single evaluation of `(10 ** 6) ** 64 ** 2`-like constants can take a while)."""
        self.work -= cost
        return self.work >= 0 and time.monotonic() < self.ctx.deadline

    # -- search -------------------------------------------------------------------------------

    def search(self, obs: list[Obligation]) -> None:
        """Look for counterexamples: fields and lets over the domain, then contracts over the
        box.
        """
        for in_contracts in (False, True):
            group = [ob for ob in obs if (ob.contract is not None) == in_contracts and ob.open]
            if group:
                try:
                    self._search_group(group, in_contracts)
                except OutOfTime:
                    return

    def _relevant(self, group: list[Obligation]) -> list[str]:
        """The params the group depends on, closed under sharing a contract; the others can stay at
        their defaults, which satisfy every contract that involves only them."""
        names: set[str] = set()
        for ob in group:
            names |= self.ctx.deps(ob.expr)
        limit = max(
            (ob.contract for ob in group if ob.contract is not None),
            default=len(self.ctx.contracts),
        )
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
        """Candidate points, random points, then every point when few enough (which proves)."""
        ctx = self.ctx
        relevant = self._relevant(group)
        domains = ctx.box if in_contracts else ctx.domains
        oks = {} if in_contracts else {name: ctx.admits(name) for name in relevant}
        params = [ctx.params[name] for name in relevant]
        defaults = [int(ctx.default[p.name]) for p in params if p.type == "int"]
        values = {
            p.name: candidate_values(
                p,
                domains[p.name],
                oks.get(p.name),
                [d for d in defaults if d != ctx.default[p.name]],
                self.rng,
            )
            for p in params
        }
        base = dict(ctx.default)
        points: Iterator[dict] = heuristic_points(base, relevant, values, self.rng, SEARCH_POINTS)
        if self._examine_all(group, points):
            return
        self._examine_all(group, random_points(base, params, domains, oks, self.rng, RANDOM_POINTS))
        size = domain_size(params, domains)
        if (
            size is not None
            and size <= self.exhaustive
            and not self._examine_all(group, all_points(base, params, domains))
        ):
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
        base = sum(_nodes(let.value) for let in ordered) + sum(
            _nodes(c) for c in self.ctx.contracts
        )
        sizes = {id(ob.expr): _nodes(ob.expr) for ob in group}
        for point in points:
            open_exprs = {id(ob.expr) for ob in group if ob.open}
            if not open_exprs:
                return True
            if not self._spend(base + sum(sizes[key] for key in open_exprs)):
                raise OutOfTime
            self._examine(point, group, ordered)
        return not any(ob.open for ob in group)

    def _examine(self, point: dict, group: list[Obligation], lets: tuple[ast.Let, ...]) -> None:
        interp = Interpreter(point, lets)
        prefix, failure = admissible_prefix(interp, self.ctx.contracts)
        results: dict[int, object] = {}
        for ob in group:
            if not ob.open:
                continue
            if ob.contract is not None:
                if (
                    prefix == ob.contract
                    and isinstance(failure, EvalError)
                    and failure.node is ob.node
                ):
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
            if violates(ob, results[key]):
                ob.refuted = (point, results[key])

    def violates_at(self, ob: Obligation, point: dict) -> object | None:
        """Check from scratch that `point` is admissible (as `ob` needs) and violates `ob`: the
        value or error that shows it, else None.
        """
        for p in self.pipeline.params:
            value = point[p.name]
            if p.type == "bool":
                if not isinstance(value, bool):
                    return None
            elif (
                isinstance(value, bool)
                or value.denominator != 1
                or value < p.lo
                or (p.hi is not None and value > p.hi)
            ):
                return None
        interp = Interpreter(point, self.pipeline.lets)
        prefix, failure = admissible_prefix(interp, self.ctx.contracts)
        if ob.contract is not None:
            found = (
                prefix == ob.contract and isinstance(failure, EvalError) and failure.node is ob.node
            )
            return failure if found else None
        if prefix < len(self.ctx.contracts):
            return None
        try:
            result: object = interp.eval(ob.expr)
        except EvalError as exc:
            result = exc
        return result if violates(ob, result) else None

    def shrink(self, ob: Obligation) -> None:
        """Move a counterexample's params, one at a time, to the violating value nearest the
        default.
        """
        assert ob.refuted is not None
        point, result = ob.refuted
        stop = time.monotonic() + SHRINK_SECONDS
        try:
            for name in self.ctx.ordered(self.ctx.deps(ob.expr)):
                good, bad = self.ctx.default[name], point[name]
                if isinstance(bad, bool) or good == bad:
                    continue
                found = self.violates_at(ob, {**point, name: good})
                if found is not None:
                    point, result = {**point, name: good}, found
                    continue
                for _ in range(128):
                    if abs(bad - good) <= 1 or time.monotonic() > stop:
                        break
                    mid = Fraction((good + bad) // 2)
                    found = self.violates_at(ob, {**point, name: mid})
                    if found is None:
                        good = mid
                    else:
                        bad, point, result = mid, {**point, name: mid}, found
                point, result = self._creep(
                    ob, name, point, result, Fraction(self.ctx.default[name]), stop
                )
        except OutOfTime:
            pass  # every point kept was checked: report the last one
        ob.refuted = (point, result)

    def _creep(
        self, ob: Obligation, name: str, point: dict, result: object, good: Fraction, stop: float
    ) -> tuple[dict, object]:
        """Step from a violating value towards `good` over the param's own admissible values (which
        bisection jumps over) while they still violate: `frames = 25`, not 21, under
        `frames % 4 == 1`.
        """
        ok = self.ctx.admits(name)
        bad = point[name]
        step = 1 if good > bad else -1
        value = bad + step
        for _ in range(SNAP_STEPS):
            if value == good or time.monotonic() > stop:
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
        proofs = self.proofs
        settings = proofs.key(self.pipeline) if proofs is not None else -1
        obs = collect(self.pipeline, self.ctx, proofs.sites if proofs is not None else None)
        if proofs is not None and proofs.left(self.pipeline) <= 0:
            return [over_budget(self.pipeline, proofs.work_per_file)]
        ctx = self.ctx
        contract_lets = frozenset(ctx.lets_read(where) for where in ctx.contracts)
        keys = {id(ob): _key(ob, settings, (ctx.lets_read(ob.expr), contract_lets)) for ob in obs}
        known: dict[int, tuple[bool, tuple[dict, object] | None]] = {}
        if proofs is not None:
            for ob in obs:
                outcome = proofs.outcomes.get(keys[id(ob)])
                if outcome is not None:
                    known[id(ob)] = outcome
                    ob.proved, ob.refuted = outcome
            proofs.misses += len(obs) - len(known)
        pending = [ob for ob in obs if id(ob) not in known and not self.cheap(ob)]
        self.results, self.searched = obs, bool(pending)
        for ob in obs:
            if id(ob) not in known:
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
            if ob.refuted is not None and self.violates_at(ob, ob.refuted[0]) is None:
                ob.refuted = None  # not a counterexample after all: left unproven
            if ob.refuted is not None:
                self.shrink(ob)
        for ob in obs:
            if ob.refuted is not None:
                diagnostics.append(refuted(ob, self._point(ob)))
            elif not ob.proved:
                diagnostics.append(unproven(ob))
        if proofs is not None:
            for ob in obs:
                if keys[id(ob)] not in proofs.outcomes:
                    proofs.keep(ob.expr, ob.node, *(cond for cond, _ in ob.facts))
                    proofs.keep(*(let.value for let in ctx.needed_lets(ob.expr)))
                    proofs.outcomes[keys[id(ob)]] = (ob.proved, ob.refuted)
            proofs.keep(*(let.value for where in ctx.contracts for let in ctx.needed_lets(where)))
            proofs.spend(self.pipeline, WORK - self.work)
        return sorted(diagnostics, key=lambda d: d.sort_key())

    def _point(self, ob: Obligation) -> str:
        assert ob.refuted is not None
        point = ob.refuted[0]
        names = self.ctx.ordered(self.ctx.deps(ob.expr))
        shown = ", ".join(f"{n} = {proof_value(point[n])}" for n in names)
        return f" at {shown}" if shown else ""


def _nodes(expr: ast.Expr) -> int:
    return len(ast.walk(expr))
