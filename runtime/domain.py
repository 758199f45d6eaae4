"""A pipeline's admissible domain: binding params by name (types checked), ranges, contracts.

Kept apart from evaluation so that the slow, explanatory paths (which constraint, which param)
live in one place and the fast paths only ask yes/no questions.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping

from artifact.cost import param_bits
from artifact.errors import (
    InadmissibleError,
    ParamError,
    ParamLimitError,
    ParamTypeError,
    UnknownParamError,
)
from artifact.ir import PipelineDecl
from artifact.spelling import bounded_param_value

__all__ = ["SEARCH_LIMIT", "Args", "Domain", "int_like"]

SEARCH_LIMIT = 10_000  # largest_admissible walks down at most this many candidate values
NEAREST_LIMIT = 256  # an inadmissible point's message looks this far down and up each param ...
NEAREST_BUDGET = 1_024  # ... and tries at most this many points in all (each runs every contract)
Args = list[int | bool] | tuple[int | bool, ...]  # param values in declaration order


def int_like(value: object) -> int | None:
    """`value` as an int if it is an int or int-like (numpy ints, via __index__) but no bool."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


class Domain:
    """Where a pipeline's params may lie; each int param's range is `[low, high]` (high may be
    inf).
    """

    # Set by `materialize` (the pipeline's code, built on first use) before they are first read.
    _admissible: Callable[..., object] | None  # every contract at once (None: no contracts)
    _contracts: tuple[Callable[..., object], ...]  # each contract alone

    def __init__(self, decl: PipelineDecl, materialize: Callable[[], None]) -> None:
        self.pipeline = decl.name
        self.names = tuple(p.name for p in decl.params)
        self.defaults: tuple[int | bool, ...] = tuple(p.default for p in decl.params)
        self.texts = tuple(c.text for c in decl.contracts)
        # name -> (index, low, high, limit); low None marks a bool param. `limit` is what the
        # cost model assumed (artifact/cost.py): every value of the param has |value| < limit.
        self.specs: dict[str, tuple[int, int | None, float, int]] = {
            p.name: (
                i,
                p.min,
                math.inf if p.max is None else p.max,
                1 << param_bits(p.min, p.max, False),
            )
            if p.min is not None and p.type == "int"
            else (i, None, 0, 2)
            for i, p in enumerate(decl.params)
        }
        self.ranges = {
            p.name: f"[{p.min}, {'inf' if p.max is None else p.max}]" for p in decl.params
        }
        self._materialize = materialize
        self._owners = tuple(self.names.index(c.param) for c in decl.contracts)

    def __getattr__(self, name: str) -> object:
        """The contracts' closures, on first use: the pipeline builds its code and sets them."""
        if name in ("_admissible", "_contracts"):
            self._materialize()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def assign(self, params: Mapping[str, object]) -> tuple[list[int | bool], bool]:
        """Defaults overridden by `params`, type-checked; and whether every value is in its
        range.
        """
        args = list(self.defaults)
        in_range = True
        specs = self.specs
        for name, value in params.items():
            spec = specs.get(name)
            if spec is None:
                raise self.first_problem(params)
            index, low, high, limit = spec
            if low is None:
                if value is not True and value is not False:
                    raise self.first_problem(params)
                args[index] = value
            else:
                number = value if type(value) is int else int_like(value)
                if number is None:
                    raise self.first_problem(params)
                if not low <= number <= high:
                    in_range = False
                elif number >= limit:  # in a range to inf, beyond what the cost model assumed
                    raise ParamLimitError(self.pipeline, name, number.bit_length(), limit)
                args[index] = number
        return args, in_range

    def bind(self, params: Mapping[str, object]) -> list[int | bool]:
        """Assign, then insist on admissibility: the checked paths' entry."""
        args, in_range = self.assign(params)
        if not in_range or not self.holds(args):
            messages, names = self.violations(args)
            raise InadmissibleError(self.pipeline, messages, names, self.nearest(args, names))
        return args

    def first_problem(self, params: Mapping[str, object]) -> ParamError:
        """The error to report, in a fixed order: unknown names as given, then types by
        declaration.
        """
        for name in params:
            if name not in self.specs:
                return UnknownParamError(self.pipeline, name, self.names)
        for name, (_, low, _, _) in self.specs.items():
            if name in params:
                value = params[name]
                if low is None and value is not True and value is not False:
                    return ParamTypeError(self.pipeline, name, "bool", value)
                if low is not None and int_like(value) is None:
                    return ParamTypeError(self.pipeline, name, "int", value)
        raise AssertionError("first_problem called without a problem")

    def holds(self, args: Args) -> bool:
        """All contracts at once; a contract that divides by zero is not satisfied."""
        if self._admissible is None:
            return True
        try:
            return bool(self._admissible(*args))
        except ZeroDivisionError:
            return False

    def violations(self, args: Args) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Readable violations of a point, and the params they concern (the explanatory path)."""
        messages: list[str] = []
        names: list[str] = []
        beyond = False  # a value the cost model did not assume: no contract may see it
        for name, (index, low, high, limit) in self.specs.items():
            if low is not None and not low <= args[index] <= high:
                messages.append(
                    f"{name} = {bounded_param_value(args[index])} is outside {self.ranges[name]}"
                )
                names.append(name)
                beyond = beyond or not -limit < args[index] < limit
        for k in [] if beyond else self.failing_contracts(args):
            owner = self._owners[k]
            problem = f"violates `{self.texts[k]}`"
            if self._raises(k, args):
                problem = f"cannot satisfy `{self.texts[k]}` (division by zero)"
            messages.append(f"{self.names[owner]} = {bounded_param_value(args[owner])} {problem}")
            names.append(self.names[owner])
        return tuple(messages), tuple(dict.fromkeys(names))

    def failing_contracts(self, args: Args) -> list[int]:
        """Indices of the contracts a point violates (or cannot evaluate: division by zero)."""
        failing = []
        for k, fn in enumerate(self._contracts):
            try:
                ok = bool(fn(*args))
            except ZeroDivisionError:
                ok = False
            if not ok:
                failing.append(k)
        return failing

    def _raises(self, k: int, args: Args) -> bool:
        """Whether contract `k` divides by zero at this point (to word the violation)."""
        try:
            self._contracts[k](*args)
        except ZeroDivisionError:
            return True
        return False

    def largest(self, name: str, at_most: object, others: Mapping[str, object]) -> int | None:
        """The largest admissible value of int param `name` not above `at_most`, walking down at
        most SEARCH_LIMIT values; None when there is none (or none close enough)."""
        spec = self.specs.get(name)
        if spec is None:
            raise UnknownParamError(self.pipeline, name, self.names)
        index, low, high, limit = spec
        if low is None:
            message = f"largest_admissible needs an int param; {name!r} is a bool"
            raise ParamTypeError(self.pipeline, name, "int", at_most, message)
        if name in others:
            message = f"{name!r} is the param being searched; do not also pass it"
            raise ParamError(message, self.pipeline, name)
        top = int_like(at_most)
        if top is None:
            raise ParamTypeError(self.pipeline, name, "int", at_most)
        args, in_range = self.assign(others)
        if high < top:
            top = int(high)
        top = min(top, limit - 1)  # no larger value is accepted (see assign)
        if not in_range or top < low:
            return None
        for value in range(top, max(low, top - SEARCH_LIMIT + 1) - 1, -1):
            args[index] = value
            if self.holds(args):
                return value
        return None

    def nearest(self, args: Args, names: tuple[str, ...]) -> tuple[str, ...]:
        """For each int param at fault, its nearest values below and above (within NEAREST_LIMIT
        and its range) that fix its own violations without breaking a contract that held: `height
        = 48 or 64`. The error path only, within NEAREST_BUDGET tries of every contract."""
        out = []
        budget = [NEAREST_BUDGET]
        for name in names:
            index, low, high, limit = self.specs[name]
            allowed = self._others_failing(args, index)
            if low is None or allowed is None:
                continue
            value = int(args[index])
            top, bottom = int(min(value - 1, high, limit - 1)), max(value + 1, low)
            below = range(top, max(low, top - NEAREST_LIMIT + 1) - 1, -1)
            above = range(bottom, int(min(high, limit - 1, bottom + NEAREST_LIMIT - 1)) + 1)
            found = [self._first_fixing(args, index, c, allowed, budget) for c in (below, above)]
            values = [str(v) for v in found if v is not None]
            if values:
                out.append(f"{name} = {' or '.join(values)}")
        return tuple(out)

    def _others_failing(self, args: Args, index: int) -> set[int] | None:
        """The failing contracts param ``index`` does not own, which a value of it may leave
        failing (none when its own value is past the cost model: no contract may see it); None
        when another value is past it."""
        within = [
            low is None or -limit < args[i] < limit for i, low, _, limit in self.specs.values()
        ]
        if not all(w for i, w in enumerate(within) if i != index):
            return None
        if not within[index]:
            return set()
        return {k for k in self.failing_contracts(args) if self._owners[k] != index}

    def _first_fixing(
        self, args: Args, index: int, candidates: range, allowed: set[int], budget: list[int]
    ) -> int | None:
        """The first candidate value of param ``index`` at which only ``allowed`` contracts fail;
        each try spends one of ``budget``."""
        trial = list(args)
        for value in candidates:
            if budget[0] <= 0:
                return None
            budget[0] -= 1
            trial[index] = value
            if set(self.failing_contracts(trial)) <= allowed:
                return value
        return None

    def point(self, args: Args) -> str:
        """A point for messages: `steps = 4, frames = 81, ..., cfg = true`."""
        return ", ".join(f"{n} = {bounded_param_value(v)}" for n, v in zip(self.names, args))
