"""The `video` pipeline the measure tests build their documents on: three int params (frames 9,
height 4, width 5 by default), and the risky memory terms two of them evaluate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtime import Pipeline, load_formulas

from .builders import I, P, contract, document, int_param, op, pipeline

PARAMS = [
    int_param("frames", 9, 1, 1000),
    int_param("height", 4, 0, 1000),
    int_param("width", 5, 0, 1000),
]
AREA = op("mul", P("height"), P("width"))
#: `[area, 100 / (height - 2), width - 3]`: divides by zero at height 2, negative below width 3.
RISKY_TERMS = [
    AREA,
    op("div", I(100), op("sub", P("height"), I(2))),
    op("sub", P("width"), I(3)),
]
#: The contract `width % 5 != 4`: width 4 is inadmissible.
NOT_FOUR = contract("width", "width % 5 != 4", op("ne", op("mod", P("width"), I(5)), I(4)))


def video(
    *stages: dict[str, Any],
    lets: Sequence[dict[str, Any]] = (),
    contracts: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A document of the one `video` pipeline with ``stages``."""
    return document(pipeline("video", PARAMS, list(stages), lets, contracts))


def load(doc: Mapping[str, object]) -> Pipeline:
    """The document's `video` pipeline, through the loader."""
    return load_formulas(doc)["video"]
