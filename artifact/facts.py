"""Validate a pipeline's facts for the calibration library: stage `uses` and `per_step`, `calls`
and `probe_axes` (all optional keys of format version 1; older artifacts have none)."""

from __future__ import annotations

from collections.abc import Mapping

from artifact.ir import CallDecl, ComponentUse, ParamDecl
from artifact.json_checks import (
    as_int,
    as_list,
    as_name,
    as_object,
    as_span,
    describe,
    fail,
    into,
    over_limit,
)
from artifact.limits import MAX_CALLS, MAX_STAGE_USES
from artifact.tree_checks import Scope, check_formula

__all__ = ["StageFacts", "calls", "probe_axes", "probe_minimums"]


class StageFacts:
    """Reads each stage's `uses` and `per_step` in turn, remembering what earlier stages claimed."""

    def __init__(self) -> None:
        self.opened: dict[tuple[str, str], str] = {}  # (component, method) -> stage
        self.stepped: str | None = None

    def read(
        self, obj: Mapping[str, object], here: object, stage: str
    ) -> tuple[tuple[ComponentUse, ...], bool]:
        """A stage's uses (each (component, method) opens one stage) and whether it is per step."""
        uses: list[ComponentUse] = []
        if "uses" in obj:
            path = into(here, ".uses")
            raw = as_list(obj["uses"], path)
            if not 1 <= len(raw) <= MAX_STAGE_USES:
                raise fail(path, f"expected 1 to {MAX_STAGE_USES} uses, got {len(raw)}")
            for j, item in enumerate(raw):
                at = into(path, f"[{j}]")
                body = as_object(item, at, ("component", "method"))
                use = ComponentUse(
                    as_name(body["component"], into(at, ".component")),
                    as_name(body["method"], into(at, ".method")),
                )
                key = (use.component, use.method)
                if key in self.opened:
                    raise fail(
                        at,
                        f"{use.component}.{use.method} already opens stage {self.opened[key]!r}",
                    )
                self.opened[key] = stage
                uses.append(use)
        per_step = False
        if "per_step" in obj:
            if obj["per_step"] is not True:
                raise fail(
                    into(here, ".per_step"),
                    f"expected true (the key is omitted when false), got "
                    f"{describe(obj['per_step'])}",
                )
            if self.stepped is not None:
                raise fail(into(here, ".per_step"), f"stage {self.stepped!r} is per step already")
            self.stepped, per_step = stage, True
        return tuple(uses), per_step


def calls(value: object, path: object, n_sources: int, scope: Scope) -> tuple[CallDecl, ...]:
    """`call` arguments: unique names, each an expression over params and lets (any type)."""
    raw = as_list(value, path)
    if len(raw) > MAX_CALLS:
        raise over_limit(
            path, f"expected at most {MAX_CALLS} calls, got {len(raw)}", limit="MAX_CALLS"
        )
    found: list[CallDecl] = []
    names: set[str] = set()
    for i, item in enumerate(raw):
        here = into(path, f"[{i}]")
        obj = as_object(item, here, ("arg", "expr", "span"))
        arg = as_name(obj["arg"], into(here, ".arg"))
        if arg in names:
            raise fail(into(here, ".arg"), f"duplicate call argument {arg!r}")
        names.add(arg)
        expr = check_formula(obj["expr"], into(here, ".expr"), scope)
        scope.charge(expr, into(here, ".expr"))  # evaluated as any formula is: bounded alike
        span = as_span(obj["span"], into(here, ".span"), n_sources)
        assert span is not None
        found.append(CallDecl(arg, expr, span))
    return tuple(found)


def probe_axes(
    value: object, path: object, params: tuple[ParamDecl, ...]
) -> tuple[tuple[str, ...], ...]:
    """Groups of int params, none empty, each param in one group (so the count is bounded)."""
    types = {p.name: p.type for p in params}
    seen: set[str] = set()
    groups = []
    for i, raw in enumerate(as_list(value, path)):
        here = into(path, f"[{i}]")
        items = as_list(raw, here)
        if not items:
            raise fail(here, "a probe group names at least one param")
        group = []
        for j, item in enumerate(items):
            at = into(here, f"[{j}]")
            name = as_name(item, at)
            if types.get(name) != "int":
                what = "a bool param" if name in types else "not a param"
                raise fail(at, f"probe axis {name!r} is {what}; axes are int params")
            if name in seen:
                raise fail(at, f"probe axis {name!r} is in two groups")
            seen.add(name)
            group.append(name)
        groups.append(tuple(group))
    return tuple(groups)


def probe_minimums(
    value: object, path: object, axes: tuple[tuple[str, ...], ...], params: tuple[ParamDecl, ...]
) -> tuple[tuple[str, int], ...]:
    """`{axis: minimum}` of `probe frames >= 9`: probe axes only, each minimum an int within its
    param's range (so the count is bounded by the axes)."""
    obj = as_object(value, path, (), tuple(name for group in axes for name in group))
    ranges = {p.name: (p.min, p.max) for p in params}
    found = []
    for name, raw in obj.items():
        at = into(path, f".{name}")
        minimum = as_int(raw, at)
        high = ranges[name][1]
        if high is not None and minimum > high:
            raise fail(at, f"probe minimum {minimum} of {name!r} lies above its range's {high}")
        found.append((name, minimum))
    return tuple(found)
