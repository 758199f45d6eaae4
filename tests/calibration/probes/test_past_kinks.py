"""One size just past a kink, from the formulas alone (calibration.probes.sizes.past_kinks): the
smallest admissible frame count past a ``min``/``max``/clamp/``if`` threshold, under a contract,
found by bisection -- checked against a scan of every admissible value (the oracle)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.probes.policy import open_stages
from calibration.probes.sizes import past_kinks
from tests.calibration.probes.kinked import Kink, formula_text

SIDE = {"steps": 1, "height": 32, "width": 32}


def pipeline(kink: Kink, modulus: int):
    from dslc.build import load_text

    default = 1 + modulus * (60 // modulus)
    contract = f" where frames % {modulus} == 1" if modulus > 1 else ""
    text = formula_text(kink).replace(
        "param frames: int = 24 in [1, 64]", f"param frames: int = {default} in [1, 64]{contract}"
    )
    return load_text(text, "kinked.wf")["kinked"]


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["min", "max", "clamp", "if"]),
    st.integers(5, 55),
    st.sampled_from([1, 2, 4, 8]),
)
def test_the_size_past_a_kink_is_the_first_admissible_value_that_decides(kind, at, modulus):
    kink = Kink(kind, at, low=1)
    wf = pipeline(kink, modulus)
    base = {**SIDE, "frames": 1}
    target = {**SIDE, "frames": 1 + modulus * (60 // modulus)}
    measured = [base, {**SIDE, "frames": 1 + modulus}]
    still_open = set(open_stages(wf, measured, target))
    found = [p for p in past_kinks(wf, measured, [base], target) if p["frames"] != base["frames"]]
    # the oracle: every admissible frame count between the base and the target, in order
    deciding = [
        f
        for f in range(2, target["frames"] + 1)
        if wf.is_admissible(**{**base, "frames": f})
        and still_open - set(open_stages(wf, [*measured, {**base, "frames": f}], target))
    ]
    if not deciding:
        assert found == []
    else:
        assert [p["frames"] for p in found] == [deciding[0]]
