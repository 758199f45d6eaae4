"""artifact.spelling: the one spelling of a point that commands, messages and tables share."""

from __future__ import annotations

import os
from pathlib import Path

from artifact.spelling import param_value, path_text, point_text


def test_bools_are_spelled_as_in_wf_files() -> None:
    assert [param_value(v) for v in (True, False, 0, 81)] == ["true", "false", "0", "81"]


def test_a_point_keeps_its_order_and_separators() -> None:
    point = {"steps": 4, "frames": 17, "cfg": False}
    assert point_text(point) == "steps=4,frames=17,cfg=false"
    assert point_text(point, sep=", ", eq=" = ") == "steps = 4, frames = 17, cfg = false"
    assert point_text({}) == ""


def test_a_path_is_named_on_one_line() -> None:
    assert path_text(Path("plans/flux 1.json")) == "plans/flux 1.json"  # printable: as given
    assert path_text("é/ü.json") == "é/ü.json"
    assert path_text("a\nb.json") == "'a\\nb.json'"
    assert path_text("\x1b[31mred.json") == "'\\x1b[31mred.json'"
    undecodable = os.fsdecode(b"x\xff.json")  # a name that is not UTF-8: a surrogate escape
    assert path_text(undecodable) == "'x\\udcff.json'"
    for hostile in ("a\nb", "a\rb", "a\tb", "\x85", "\u2028"):
        assert "\n" not in path_text(hostile) and path_text(hostile).isprintable(), hostile
