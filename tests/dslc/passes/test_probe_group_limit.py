"""A probe group larger than calibration can weigh is a `limit` diagnostic (issue 23): a 25-param
group passed `check` and then ran `calibrate` out of memory over its 2**25 corners; check-ok now
implies calibrate can plan it."""

from __future__ import annotations

import pytest

from artifact.limits import MAX_PROBE_GROUP
from dslc.compiler import compile_text
from tests.budget import count_calls


def source(n: int) -> str:
    params = "\n".join(f"    param p{i}: int = 64 in [1, 4096]" for i in range(n))
    terms = " + ".join(f"p{i}" for i in range(n))
    axes = ", ".join(f"p{i}" for i in range(n))
    return (
        f"pipeline wide {{\n{params}\n    probe {axes}\n"
        f"    stage DenoisingStage {{ memory ~ {terms} }}\n}}\n"
    )


def test_a_probe_group_of_25_params_is_a_limit_error_naming_the_limit():
    result, calls = count_calls(lambda: compile_text(source(25), "wide.wf"))
    expected = (
        f"probe group of 25 params; the limit is {MAX_PROBE_GROUP}: calibration weighs the "
        "2**25 corners of its box"
    )
    assert [(d.code, d.message) for d in result.errors] == [("limit", expected)]
    assert calls < 2_000_000  # linear in the source, nothing per corner


@pytest.mark.parametrize("n", [1, MAX_PROBE_GROUP])
def test_a_group_within_the_limit_checks(n):
    result = compile_text(source(n), "wide.wf")
    assert result.ok, [d.message for d in result.diagnostics]
