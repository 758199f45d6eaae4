"""What the cheap passes found of each member expression, kept for one compilation.

A child pipeline holds the very expression objects of the members it inherits: walking each of
them once, not once per child, makes checking a family or an inheritance chain cost what its new
members cost (issue 23). Each pass reuses a result only where everything it read is the same.
"""

from __future__ import annotations

from dslc import ast
from dslc.diagnostics import Diagnostic

__all__ = ["Members"]

_Found = tuple[ast.Field, tuple[Diagnostic, ...], tuple[Diagnostic, ...]]


class Members:
    """Per compilation: each expression's names (and whether it calls an unknown function), and
    the type pass's findings for a field in a given context."""

    def __init__(self) -> None:
        self._names: dict[int, tuple[ast.Expr, frozenset[str], bool]] = {}
        # (field, stage, what it reads) -> (the field, the checker's problems, the returned ones)
        self.fields: dict[tuple[object, ...], _Found] = {}
        self.walks = 0  # expressions walked afresh: the work the tests bound

    def names(self, expr: ast.Expr) -> tuple[frozenset[str], bool]:
        """The names `expr` refers to, and whether it calls a function that does not exist."""
        found = self._names.get(id(expr))
        if found is None or found[0] is not expr:
            names: set[str] = set()
            unknown_call = False
            for node in ast.walk(expr):
                if isinstance(node, ast.Name):
                    names.add(node.id)
                elif isinstance(node, ast.Call) and node.func not in ast.FUNCTIONS:
                    unknown_call = True
            found = (expr, frozenset(names), unknown_call)  # keeps `expr` alive: its id stays
            self._names[id(expr)] = found
            self.walks += 1
        return found[1], found[2]
