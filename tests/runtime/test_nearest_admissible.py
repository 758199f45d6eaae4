"""An inadmissible point's error names the nearest admissible values of each param at fault
(``runtime.domain.Domain.nearest``), so every command says how to fix the point, not only what is
wrong: found below and above within ``NEAREST_LIMIT``, fixing the param's own contracts without
breaking one that held."""

from __future__ import annotations

import pytest

from dslc.build import load_text
from runtime import InadmissibleError, Pipeline
from runtime.domain import NEAREST_LIMIT

SOURCE = f"""
pipeline p {{
    param steps: int = 4 in [1, 100]
    param height: int = 64 in [16, 512] where height % 16 == 0
    param width: int = 64 in [16, 512] where width % 16 == 0 and width <= height * 2
    param sparse: int = 0 in [0, 100000] where sparse % {3 * NEAREST_LIMIT} == 0
    stage S {{ iterations = steps }}
}}
"""


@pytest.fixture(scope="module")
def pipeline() -> Pipeline:
    return load_text(SOURCE, "p.wf")["p"]


@pytest.mark.parametrize(
    ("params", "nearest"),
    [
        ({"height": 60}, "height = 48 or 64"),
        ({"steps": 0}, "steps = 1"),
        ({"height": 10**30}, "height = 512"),  # past the range: its end, searched down
        ({"height": 16, "width": 40}, "width = 32"),  # 48 would break width <= height * 2
        ({"height": 8}, "height = 16; width = 16"),  # width <= height * 2 is width's to fix
        ({"height": 60, "width": 70}, "height = 48 or 64; width = 64 or 80"),
    ],
)
def test_the_nearest_admissible_values_follow_the_violations(pipeline, params, nearest) -> None:
    with pytest.raises(InadmissibleError) as info:
        pipeline.iterations("S", **params)
    first = "; ".join(info.value.violations)
    assert str(info.value) == (
        f"point is not admissible for pipeline 'p': {first} (nearest admissible: {nearest})"
    )


def test_no_value_within_the_limit_leaves_the_message_as_it_was(pipeline) -> None:
    sparse = 3 * NEAREST_LIMIT // 2  # the admissible values 0 and 3 * limit: both out of reach
    with pytest.raises(InadmissibleError) as info:
        pipeline.iterations("S", sparse=sparse)
    assert info.value.suggestions == ()
    assert str(info.value).endswith(f"sparse = {sparse} violates `sparse % 768 == 0`")
