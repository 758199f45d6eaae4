"""artifact.spelling: the one spelling of a point that commands, messages and tables share."""

from __future__ import annotations

from artifact.spelling import param_value, point_text


def test_bools_are_spelled_as_in_wf_files() -> None:
    assert [param_value(v) for v in (True, False, 0, 81)] == ["true", "false", "0", "81"]


def test_a_point_keeps_its_order_and_separators() -> None:
    point = {"steps": 4, "frames": 17, "cfg": False}
    assert point_text(point) == "steps=4,frames=17,cfg=false"
    assert point_text(point, sep=", ", eq=" = ") == "steps = 4, frames = 17, cfg = false"
    assert point_text({}) == ""
