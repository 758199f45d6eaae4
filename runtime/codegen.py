"""Python source for a pipeline's evaluators, generated from validated nodes only.

Each evaluator is a plain function of the params, or, when it needs constants (`_C`), helper
functions or the pipeline's shared lets (`_L`), a small *factory* returning the closure.

The text is linear in the artifact: a function computes the lets it needs itself only while they
are small (`_INLINE_NODES` in all); otherwise it calls the pipeline's one lets function, which
computes every let once per call. A pipeline of many params passes them as one tuple (`*_a`),
each function unpacking only the params it uses, so no function's text grows with their number.

The text never contains anything from the artifact: params are `p<i>`, lets `l<i>`, constants
`c<i>`, helpers `h<i>`; literals are `repr` of validated small ints, `True`/`False` and exponents
in [0, 64]. Because constants and defaults travel as arguments, pipelines with the same formulas
produce the same text, compiled once per book.
"""

from __future__ import annotations

from artifact.cost import param_bits
from artifact.ir import Expr, Frozen, PipelineDecl

__all__ = ["FunctionPlan", "PipelinePlan", "plan_pipeline"]

_INLINE_NODES = 64  # lets a function may recompute itself, in nodes; beyond, it shares `_L`
_POSITIONAL = 16  # params spelled out in each function's signature; more travel as `*_a`
_HOIST_LEVEL = 48  # Python refuses >200 nested parentheses: deeper subtrees become helper functions
_SMALL_INT = 1 << 62  # larger literals travel as constants, not source text
_BINARY_OPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%"}
_COMPARE_OPS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_CAN_DIVIDE_BY_ZERO = frozenset({"div", "floordiv", "mod"})


class FunctionPlan(Frozen):
    """A function's source (its name left as `{name}`): either the closure itself, or, when it
    needs constants or helpers, a factory taking them (`factory`)."""

    __slots__ = ("consts", "factory", "lets", "role", "text")
    role: str  # s<stage>f<field>, iters, ok, k<contract>, s<stage>t<term> (memory), s<stage>u<term>
    # (time), calls, every, checked, or lets
    text: str
    consts: tuple[object, ...]
    factory: bool
    lets: bool  # whether the factory also takes the pipeline's shared lets function (`_L`)


class PipelinePlan(Frozen):
    """Every factory of one pipeline, in order: 3 per stage, iters, ok, one per contract, one per
    memory term of each stage whose memory lists terms (stage by stage), the same for time terms,
    calls (when the pipeline declares any), every, checked."""

    __slots__ = ("functions", "lets", "rational")
    functions: tuple[FunctionPlan, ...]
    rational: bool  # whether some iterations are typed rational (so results need an int test)
    lets: FunctionPlan | None  # every let at once (`_L`), when some function shares it


class _SourceWriter:
    """Turns validated expressions into source text; one function at a time (`begin`)."""

    def __init__(
        self, decl: PipelineDecl, inline_nodes: int = _INLINE_NODES, positional: int = _POSITIONAL
    ) -> None:
        self.decl = decl
        self.inline_nodes = inline_nodes
        self.let_deps: list[frozenset[int]] = []  # every let a let needs, transitively
        self.let_params: list[frozenset[int]] = []  # every param a let depends on, transitively
        self.may_raise: list[bool] = []  # whether a let's value can divide by zero
        self.let_nodes = [_count(let.expr) for let in decl.lets]
        self.wide = len(decl.params) > positional
        self.shared = False  # lets are read from `_l`, the shared lets' tuple, in this function
        self.used_shared = False  # some function shares the lets: plan the lets function too
        for let in decl.lets:
            refs, divides = scan(let.expr)
            deps, params = set(refs), set(params_of(let.expr))
            for j in refs:
                deps |= self.let_deps[j]
                params |= self.let_params[j]
            self.let_deps.append(frozenset(deps))
            self.let_params.append(frozenset(params))
            self.may_raise.append(divides or any(self.may_raise[j] for j in refs))
        self._refs: dict[int, set[int]] = {}
        self.begin()

    def refs(self, e: Expr) -> set[int]:
        """The lets `e` refers to directly (memoised by node: each field is scanned twice)."""
        found = self._refs.get(id(e))
        if found is None:
            found = self._refs[id(e)] = scan(e)[0]
        return found

    def begin(self) -> None:
        """Start a new function: constants and helpers are numbered per function."""
        self.consts: list[object] = []
        self.helpers: list[str] = []

    def const(self, value: object) -> str:
        """A value passed to the factory, named `c<i>` in the source."""
        self.consts.append(value)
        return f"c{len(self.consts) - 1}"

    def literal(self, value: int) -> str:
        """A validated int as source: `repr` when small, else a constant."""
        assert type(value) is int
        if -_SMALL_INT < value < _SMALL_INT:
            return repr(value) if value >= 0 else f"({value!r})"
        return self.const(value)

    def expr(self, e: Expr, level: int) -> str:
        """Source for `e`, nested `level` parentheses deep; deep subtrees go to helper functions."""
        if level >= _HOIST_LEVEL and e.args:
            return self.hoist(e)
        kind, args = e.kind, e.args
        if kind == "int":
            assert type(e.value) is int
            return self.literal(e.value)
        if kind == "frac":
            return self.const(e.value)
        if kind == "bool":
            return "True" if e.value is True else "False"
        if kind == "param":
            return f"p{e.ref:d}"
        if kind == "let":
            return f"_l[{e.ref:d}]" if self.shared else f"l{e.ref:d}"
        sub = []
        for arg in args:  # a plain loop: one Python frame per tree level
            sub.append(self.expr(arg, level + 1))
        if kind in _BINARY_OPS:
            return f"({sub[0]} {_BINARY_OPS[kind]} {sub[1]})"
        if kind in _COMPARE_OPS:
            return f"({sub[0]} {_COMPARE_OPS[kind]} {sub[1]})"
        if kind == "div":
            return f"_F({sub[0]}, {sub[1]})"
        if kind == "neg":
            return f"(-{sub[0]})"
        if kind == "abs":
            return f"_abs({sub[0]})"
        if kind in ("floor", "ceil"):
            return sub[0] if args[0].type == "int" else f"_{kind}({sub[0]})"
        if kind == "pow":
            assert type(e.exp) is int and 0 <= e.exp <= 64
            return f"({sub[0]} ** {e.exp:d})"
        if kind in ("min", "max"):
            return sub[0] if len(sub) == 1 else f"_{kind}({', '.join(sub)})"
        if kind in ("and", "or"):
            return f"({sub[0]} {kind} {sub[1]})"
        if kind == "not":
            return f"(not {sub[0]})"
        if kind == "if":
            return f"({sub[1]} if {sub[0]} else {sub[2]})"
        # unreachable: tree_checks.py refused it
        raise AssertionError(f"unvalidated node kind {kind!r}")

    def hoist(self, e: Expr) -> str:
        """Move a subtree into a helper taking the variables it uses, called where evaluated."""
        names = ", ".join(variables(e, self.shared))
        body = self.expr(e, 1)
        name = f"h{len(self.helpers)}"
        self.helpers.append(f"    def {name}({names}):\n        return {body}\n")
        return f"{name}({names})"

    def factory(self, role: str, head: str, body: list[str], result: str) -> FunctionPlan:
        """Wrap a closure's lines (`body`, defining `result`) in a factory of the constants and
        helpers it needs; a closure needing none (`head` empty) stands alone, a plain function."""
        if not (head or self.consts or self.helpers):
            first = body[0][4:].replace(f"def {result}(", "def {name}(", 1)
            text = "\n".join([first] + [line[4:] for line in body[1:]]) + "\n"
            self.begin()
            return FunctionPlan(role, text, (), False, False)
        lines = [f"def {{name}}(_C{head}):"]
        if self.consts:
            lines.append(f"    ({''.join(f'c{i}, ' for i in range(len(self.consts)))}) = _C")
        text = "\n".join([*lines, *self.helpers, *body, f"    return {result}"]) + "\n"
        plan = FunctionPlan(role, text.replace("\n\n", "\n"), tuple(self.consts), True, False)
        self.begin()
        return plan

    def header(self, used: set[int]) -> list[str]:
        """`def f(p0, p1, ...)`, or for many params `def f(*_a)` unpacking only those `used`."""
        n = len(self.decl.params)
        if not self.wide:
            return [f"    def f({', '.join(f'p{i}' for i in range(n))}):"]
        lines = ["    def f(*_a):"]
        for i in sorted(used):
            lines.append(f"        p{i} = _a[{i}]")
        return lines

    def lets_call(self) -> str:
        """The statement computing the shared lets' tuple in a function that needs it."""
        n = len(self.decl.params)
        args = "*_a" if self.wide else ", ".join(f"p{i}" for i in range(n))
        return f"        _l = _L({args})"

    def function(self, role: str, exprs: list[Expr], combine: str) -> FunctionPlan:
        """A closure of all params computing the lets `exprs` need (itself, or through the shared
        lets function when they are large), then `exprs` combined."""
        needed: set[int] = set()
        for e in exprs:
            for j in self.refs(e):
                needed |= self.let_deps[j] | {j}
        self.shared = sum(self.let_nodes[j] for j in needed) > self.inline_nodes
        used: set[int] = set()
        if self.wide:
            for e in exprs:
                used.update(params_of(e))
            if not self.shared:
                for j in needed:
                    used |= self.let_params[j]
        body = self.header(used)
        if self.shared:
            self.used_shared = True
            body.append(self.lets_call())
            needed = set()
        for j in sorted(needed):
            body += self.let_lines(j)
        parts = []
        for e in exprs:
            code = self.expr(e, 2)
            # `_n` normalises integral Fractions and forces an undefined let that an `if` passed on
            forced = e.type != "bool" and any(self.may_raise[j] for j in self.refs(e))
            parts.append(f"_n({code})" if e.type == "rat" or forced else code)
        if combine == "tuple":
            result = f"({''.join(p + ', ' for p in parts)})"
        elif combine == "guarded":  # a tuple that holds `_U` where a part divides by zero
            for i, part in enumerate(parts):
                body += ["        try:", f"            v{i} = {part}", "        except _Z:"]
                body.append(f"            v{i} = _U")
            result = f"({''.join(f'v{i}, ' for i in range(len(parts)))})"
        elif combine == "all":
            result = " and ".join(parts) if parts else "True"
        else:
            result = parts[0]
        body.append(f"        return {result}")
        shared, self.shared = self.shared, False
        plan = self.factory(role, ", _L" if shared else "", body, "f")
        return FunctionPlan(plan.role, plan.text, plan.consts, plan.factory, shared)

    def let_lines(self, j: int) -> list[str]:
        """Let ``j``'s assignment (lazy: a division by zero waits until the value is used)."""
        code = self.expr(self.decl.lets[j].expr, 0)
        if not self.may_raise[j]:
            return [f"        l{j} = {code}"]
        return [
            "        try:",
            f"            l{j} = {code}",
            "        except _Z:",
            f"            l{j} = _U",
        ]

    def lets_function(self) -> FunctionPlan:
        """Every let, each computed once, as one tuple: shared by functions whose lets are large."""
        body = self.header(set(range(len(self.decl.params))))
        for j in range(len(self.decl.lets)):
            body += self.let_lines(j)
        body.append(f"        return ({''.join(f'l{j}, ' for j in range(len(self.decl.lets)))})")
        plan = self.factory("lets", "", body, "f")
        return FunctionPlan(plan.role, plan.text, plan.consts, plan.factory, False)

    def checked(self) -> FunctionPlan:
        """The factory of fast checked entries, instantiated once per field kind.

        An entry binds params by keyword in C (see evaluator.rename); defaults pass on an identity
        test, other values on inline type, range and contract tests; anything irregular (unknown
        name, wrong type, inadmissible point, division by zero, bad result) goes to `_slow`, the
        general Python path, which raises the precise error or returns the same value.
        Positional-or-keyword params bind faster than keyword-only ones; `_x` catches a value
        passed by position instead. `_I` is int where results must be ints, else None.
        """
        decl = self.decl
        n = len(decl.params)
        args = ", ".join(f"p{i}" for i in range(n))
        slow = f"return _slow(_s, _kw, ({''.join(f'p{i}, ' for i in range(n))}), _x)"
        own, shared = self.contract_tests(args)
        tests = [*self.param_tests(own), *shared]
        # Results must be >= 0; int-typed iterations are ints by construction, rational ones are
        # tested (`_I` is int for the iterations entry, None for memory and time).
        rational = any(st.iterations.expr.type == "rat" for st in decl.stages)
        result_test = "_v >= 0 and (_I is None or _type(_v) is _I)" if rational else "_v >= 0"
        head = "".join(f", p{i}=d{i}" for i in range(n))
        unpack = f"    ({''.join(f'd{i}, ' for i in range(n))}) = _D" if n else "    pass"
        body = [
            unpack,
            f"    def checked(_s, /, _x=_P{head}, **_kw):",
            "        _f = _T.get(_s)",
            "        if _f is None or _kw or _x is not _P:",
            f"            {slow}",
            *([f"        _a = ({args},)"] if self.wide else []),
            "        try:",
            f"            if not ({' and '.join(tests) or 'True'}):",
            f"                {slow}",
            f"            _v = _f({args})",
            "        except _Z:",
            f"            {slow}",
            f"        if {result_test}:",
            "            return _v",
            f"        {slow}",
        ]
        plan = self.factory("checked", ", _D, _K, _T, _slow, _I", body, "checked")
        return FunctionPlan(plan.role, plan.text, plan.consts, plan.factory, False)

    def contract_tests(self, args: str) -> tuple[list[list[str]], list[str]]:
        """Each param's own contract tests, and the tests of contracts over several params or lets.

        A param's default passes on identity; another value needs the right type, its range and
        the contracts over it alone. Contracts over several params (or lets) come after, skipped
        when all their params are at their defaults (the loader checked those).
        """
        own: list[list[str]] = [[] for _ in self.decl.params]
        shared = []
        for j, contract in enumerate(self.decl.contracts):
            lets, _ = scan(contract.expr)
            used = sorted(set(params_of(contract.expr)).union(*(self.let_params[k] for k in lets)))
            call = "*_a" if self.wide else args
            code = f"_K[{j}]({call})" if lets else self.expr(contract.expr, 3)
            if len(used) == 1 and not lets:
                own[used[0]].append(code)
            elif used:
                shared.append(f"({' and '.join(f'p{i} is d{i}' for i in used)} or {code})")
        return own, shared

    def param_tests(self, own: list[list[str]]) -> list[str]:
        """Per param: its default by identity, or its type, its range and its own contracts."""
        tests = []
        for i, p in enumerate(self.decl.params):
            if p.type == "bool":
                checks = [f"(p{i} is True or p{i} is False)", *own[i]]
            else:
                assert p.min is not None
                if p.max is not None:
                    high = f" <= {self.literal(p.max)}"
                else:  # to inf: below what the cost model assumed, else `_slow` raises
                    high = f" < {self.literal(1 << param_bits(p.min, None, False))}"
                checks = [f"_type(p{i}) is _int", f"{self.literal(p.min)} <= p{i}{high}", *own[i]]
            tests.append(f"(p{i} is d{i} or ({' and '.join(checks)}))")
        return tests


def plan_pipeline(
    decl: PipelineDecl, *, inline_nodes: int = _INLINE_NODES, positional: int = _POSITIONAL
) -> PipelinePlan:
    """The source of every factory of one pipeline, with the constants each is instantiated with
    (tests lower `inline_nodes` and `positional` to reach every layout with small pipelines)."""
    writer = _SourceWriter(decl, inline_nodes, positional)
    plans = []
    for s, stage in enumerate(decl.stages):
        for f, field in enumerate((stage.iterations, stage.memory, stage.time)):
            plans.append(writer.function(f"s{s}f{f}", [field.expr], "single"))
    plans.append(writer.function("iters", [st.iterations.expr for st in decl.stages], "tuple"))
    plans.append(writer.function("ok", [c.expr for c in decl.contracts], "all"))
    for k, contract in enumerate(decl.contracts):
        plans.append(writer.function(f"k{k}", [contract.expr], "single"))
    for s, stage in enumerate(decl.stages):  # one closure per term, so an error can name its term
        for t, term in enumerate(stage.memory_terms):
            plans.append(writer.function(f"s{s}t{t}", [term.expr], "single"))
    for s, stage in enumerate(decl.stages):  # then every time term, the same way
        for t, term in enumerate(stage.time_terms):
            plans.append(writer.function(f"s{s}u{t}", [term.expr], "single"))
    if decl.calls:  # every `call` argument at once, as a tuple in declaration order
        plans.append(writer.function("calls", [c.expr for c in decl.calls], "tuple"))
    # Every field, then every term, in one call computing each let once: `evaluate` and the
    # loader's check of the default workload take work linear in the pipeline, not fields x lets.
    every = [f.expr for st in decl.stages for f in (st.iterations, st.memory, st.time)]
    every += [term.expr for st in decl.stages for term in st.memory_terms]
    every += [term.expr for st in decl.stages for term in st.time_terms]
    plans.append(writer.function("every", every, "guarded"))
    plans.append(writer.checked())
    rational = any(st.iterations.expr.type == "rat" for st in decl.stages)
    lets = writer.lets_function() if writer.used_shared else None
    return PipelinePlan(tuple(plans), rational, lets)


def params_of(e: Expr) -> list[int]:
    """The params an expression names directly (an iterative walk)."""
    found = []
    stack = [e]
    while stack:
        node = stack.pop()
        if node.kind == "param":
            assert node.ref is not None
            found.append(node.ref)
        stack.extend(node.args)
    return found


def scan(e: Expr) -> tuple[set[int], bool]:
    """The lets an expression refers to directly, and whether it may divide by zero."""
    refs: set[int] = set()
    divides = False
    stack = [e]
    while stack:
        node = stack.pop()
        if node.kind == "let":
            assert node.ref is not None
            refs.add(node.ref)
        if node.kind in _CAN_DIVIDE_BY_ZERO:
            divisor = node.args[1]
            divides = divides or divisor.kind not in ("int", "frac") or divisor.value == 0
        stack.extend(node.args)
    return refs, divides


def variables(e: Expr, shared: bool = False) -> list[str]:
    """The p<i>/l<i> names a subtree uses, sorted, for a helper's signature (with `shared`, the
    lets' tuple `_l` stands for every let)."""
    found: set[tuple[str, int]] = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if node.kind in ("param", "let"):
            assert node.ref is not None
            found.add(("_l", -1) if shared and node.kind == "let" else (node.kind[0], node.ref))
        stack.extend(node.args)
    return [p if i < 0 else f"{p}{i:d}" for p, i in sorted(found, key=lambda f: (f[1] < 0, f))]


def _count(e: Expr) -> int:
    """The nodes of a tree (an iterative walk)."""
    count = 0
    stack = [e]
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(node.args)
    return count
