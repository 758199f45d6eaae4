"""A bound under the peak ``--verify`` measured is never silent: a ``bound-under`` finding names the
stage, the bytes under, the share of its activations the formula missed and the growth it lacks,
with a hint that never asks for a declared term (issue 41; calibration.probes.under)."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from artifact.point import Point
from calibration.calibrate.report import document
from calibration.calibrate.run import Calibration, calibrate_session
from calibration.calibrate.verdict import VERIFY_FAILED, verdict
from calibration.core.session import Session
from calibration.probes.findings import check
from calibration.probes.residuals import StageFit
from calibration.probes.under import best_term
from runtime import Pipeline
from runtime.kinds import FindingKind
from tests.calibration.probes.kinked import PLAIN, Decoder, Kink, Kinked

TARGET = {"steps": 2, "frames": 24, "height": 96, "width": 96}
PROBE = {"steps": 1, "frames": 8, "height": 32, "width": 32}
WARMUP = {"steps": 1, "frames": 4, "height": 16, "width": 16}
#: Past every size the loop measures for TARGET (the largest holds 20 x 80 x 96 = 153,600 units)
#: and under the target's 221,184: the sizes cannot see the scores, only the target's run does.
THRESHOLD = 160_000
SQUARE = "(frames * height * width) * (frames * height * width)"
DECLARED = "frames * height * width"


def _units(params: Point) -> int:
    return int(params["frames"]) * int(params["height"]) * int(params["width"])


class Scores(Decoder):
    """A decode that, past ``THRESHOLD`` units, also holds scores of units x units / 2**19 bytes
    (an attention that materialises them past some size), which the plain formula lacks."""

    def decode(self, params: Point) -> int:
        n = _units(params)
        declared = torch.ones(n, dtype=torch.uint8)
        scores = torch.ones(n * n >> 19 if n > THRESHOLD else 0, dtype=torch.uint8)
        return int(declared.sum()) + int(scores.sum())


@pytest.fixture(scope="module")
def formulas() -> Pipeline:
    from dslc.build import load_text

    return load_text(PLAIN, "plain.wf")["extra"]


def _calibrated(formulas: Pipeline, decoder: Decoder | None) -> Calibration:
    pipe = Kinked(Kink("min", 64))
    if decoder is not None:
        pipe.vae = decoder
    session = Session(pipe, formulas, "cpu")  # type: ignore[arg-type]  # its own keywords
    return calibrate_session(
        session, target=TARGET, probe=PROBE, warmup=WARMUP, verify=True, repeat=1
    )


@pytest.fixture(scope="module")
def under(formulas: Pipeline) -> Calibration:
    return _calibrated(formulas, Scores(Kink("min", 64), (1, 1)))


def test_a_bound_under_names_the_stage_and_the_growth(under: Calibration) -> None:
    cal = under
    sizes = [_units(r.params) for r in cal.records]
    assert max(sizes) < THRESHOLD < _units(TARGET), sizes  # only the target holds the scores
    judged = verdict(cal)
    assert judged.status == VERIFY_FAILED and not judged.holds
    assert "bound-under on DecodingStage memory" in judged.findings
    found = [f for f in cal.findings if f.kind == FindingKind.BOUND_UNDER]
    assert [f.stage for f in found] == ["DecodingStage"], cal.findings
    finding = found[0]
    assert finding.actionable
    text = finding.message
    assert "under the peak the target measured" in text
    assert "of the stage's activations" in text
    assert f"grows faster than `{DECLARED}`" in text and "along frames, height" in text
    assert "steps" not in text.split("along")[1].split(";")[0]  # the decode does not grow in it
    assert f"`{SQUARE}`" in text
    # the finding's bytes are the measured ones: the target's run above what the fit predicted
    scores = _units(TARGET) ** 2 >> 19
    assert scores * 0.98 <= finding.risk <= scores * 1.02, (finding.risk, scores)
    assert f"such as `{SQUARE}`" in finding.next_step
    assert f"`{DECLARED}`," not in finding.next_step  # never a declared term as the one to add


def test_the_report_carries_it(under: Calibration) -> None:
    found = document(under)["findings"]
    assert isinstance(found, list)
    kinds = [f["kind"] for f in found if isinstance(f, dict)]
    assert FindingKind.BOUND_UNDER in kinds
    row = next(f for f in found if isinstance(f, dict) and f["kind"] == FindingKind.BOUND_UNDER)
    assert row["actionable"] is True and row["stage"] == "DecodingStage"


def test_a_right_formula_gets_none(formulas: Pipeline) -> None:
    cal = _calibrated(formulas, None)  # the plain decode: twice its units, as the formula says
    assert verdict(cal).holds
    assert not [f for f in cal.findings if f.kind == FindingKind.BOUND_UNDER]


@pytest.fixture(scope="module")
def decode_fit(under: Calibration, formulas: Pipeline) -> StageFit:
    fits = check(formulas, under.records, under.shapes.target, under.backend).fits
    return next(f for f in fits if f.phase == "component:vae@DecodingStage")


@settings(max_examples=20, deadline=None)
@given(extra=st.fractions(Fraction(1, 1000), Fraction(2)))
@example(extra=Fraction(0))
def test_the_term_is_the_growth_the_target_adds(
    formulas: Pipeline, decode_fit: StageFit, extra: Fraction
) -> None:
    """Whatever the scores add at the target (a share of its predicted activations), the term
    named is the square; with nothing added, none is (the declared terms explain everything)."""
    above = decode_fit.at_target * (1 + float(extra))
    term = best_term(formulas, decode_fit, TARGET, above)
    if extra == 0:
        assert term is None
    else:
        assert term is not None and term.text == SQUARE, (extra, term)
