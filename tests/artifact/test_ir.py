"""`Expr` is a tuple underneath (fast to make at load) yet behaves as the other frozen types."""

from __future__ import annotations

import copy
import pickle

import pytest

from artifact.ir import Expr


def node(value: int = 3) -> Expr:
    return Expr("int", "int", (), value, None, None, 2)


def test_fields_by_name_with_defaults() -> None:
    e = Expr("add", "int", (node(), node(4)), None, None, None, 4, 0, 9)
    assert (e.kind, e.type, e.value, e.ref, e.exp, e.bits, e.dbits, e.work) == (
        "add", "int", None, None, None, 4, 0, 9,
    )  # fmt: skip
    assert e.args == (node(), node(4)) and e.args[1].value == 4
    assert (node().dbits, node().work) == (0, 1)


def test_immutable() -> None:
    e = node()
    with pytest.raises(AttributeError):
        e.value = 5
    with pytest.raises(AttributeError):
        e.other = 1  # type: ignore[attr-defined]


def test_equal_only_to_an_expr_of_equal_fields() -> None:
    assert node() == node() and hash(node()) == hash(node())
    assert node() != node(4)
    assert node() != tuple(node()) and tuple(node()) != node()  # nor to a plain tuple
    assert (node() == tuple(node()), tuple(node()) == node()) == (False, False)
    assert node() != ("int", "int", (), 3, None, None, 2, 0, 1)
    assert len({node(), node(), node(4)}) == 2


def test_copies_pickles_and_reprs() -> None:
    e = Expr("neg", "int", (node(),), None, None, None, 2, 0, 3)
    assert pickle.loads(pickle.dumps(e)) == e and copy.deepcopy(e) == e
    assert type(copy.copy(e)) is Expr
    assert repr(node()) == (
        "Expr(kind='int', type='int', args=(), value=3, ref=None, exp=None, bits=2, dbits=0, "
        "work=1)"
    )
