"""A bound that grows with the quantified risk, continuously (calibration.probes.evidence): a
finding whose risk is quantified keeps its stage's margin from evidence and adds the risk, so a
1 % risk costs about 1 %, never the fixed margin's 20 % (issue 41, item 1)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from artifact.point import Point
from calibration.calibrate.run import Calibration, calibrate_session
from calibration.core.session import Session
from calibration.probes.evidence import QUANTIFIED, stage_margins, with_risks
from calibration.probes.finding import MATERIAL, Checked, Finding
from calibration.probes.findings import check
from calibration.probes.residuals import StageFit
from runtime import Pipeline
from runtime.estimate import DEFAULT_MARGIN, WorkloadEstimate, estimate
from runtime.kinds import EARNED, FindingKind, MarginSource, Quantity
from tests.calibration.probes.kinked import PLAIN as FORMULAS
from tests.calibration.probes.kinked import Decoder, Kink, Kinked

TARGET = {"steps": 2, "frames": 24, "height": 96, "width": 96}
DECODE = "stage:DecodingStage"


class ExtraRow(Decoder):
    """A decode that also holds ``frames * height`` bytes the formula leaves out: about 1 % of its
    peak at the target."""

    def decode(self, params: Point) -> int:
        f, h, w = (int(params[k]) for k in ("frames", "height", "width"))
        declared = torch.ones(f * h * w, dtype=torch.uint8)
        row = torch.ones(f * h, dtype=torch.uint8)
        return int(declared.sum()) + int(row.sum())


@pytest.fixture(scope="module")
def formulas() -> Pipeline:
    from dslc.build import load_text

    return load_text(FORMULAS, "extra.wf")["extra"]


@pytest.fixture(scope="module")
def calibrated(formulas: Pipeline) -> Calibration:
    pipe = Kinked(Kink("min", 64))
    pipe.vae = ExtraRow(Kink("min", 64), (1, 1))
    session = Session(pipe, formulas, "cpu")  # type: ignore[arg-type]  # its own keywords
    return calibrate_session(
        session,
        target=TARGET,
        probe={"steps": 1, "frames": 8, "height": 32, "width": 32},
        warmup={"steps": 1, "frames": 4, "height": 16, "width": 16},
        verify=True,
        repeat=1,
    )


def _measured(cal: Calibration) -> float:
    """The decode's measured peak at the target."""
    return next(c.measured for c in cal.phases() if c.label == DECODE and c.measured)


def test_a_one_percent_finding_costs_about_one_percent(calibrated: Calibration) -> None:
    cal = calibrated
    found = [f for f in cal.findings if f.stage == "DecodingStage" and f.quantity == "memory"]
    assert [f.kind for f in found] == [FindingKind.FORMULA_MISMATCH]  # still named, to act on
    assert MATERIAL[Quantity.MEMORY] <= found[0].share <= 0.03, found[0]  # a percent or two
    margins = {m.stage: m for m in cal.margins}
    assert margins["DecodingStage"].source == MarginSource.RISK, margins["DecodingStage"]
    assert "formula-mismatch finding's risk" in margins["DecodingStage"].reason
    for c in [*cal.phases(), cal.request_peak()]:
        if c.measured and c.bound is not None:
            assert 0 <= c.bound / c.measured - 1 <= 0.05, c
    fixed = cal.fixed_bounds[DECODE]
    assert fixed is not None and fixed / _measured(cal) - 1 > 0.15  # the cliff it replaces


@pytest.fixture(scope="module")
def fits(calibrated: Calibration, formulas: Pipeline) -> tuple[StageFit, ...]:
    """The calibration's fits, checked once (each Hypothesis example reads them)."""
    cal = calibrated
    return check(formulas, cal.records, cal.shapes.target, cal.backend).fits


def _bounded(
    cal: Calibration,
    formulas: Pipeline,
    fits: tuple[StageFit, ...],
    kind: FindingKind,
    risk: float,
    of: float | None = None,
    at: Mapping[str, int] | None = None,
) -> WorkloadEstimate:
    """The estimate with one finding of ``kind`` and ``risk`` (its share of ``of`` bytes, the
    measured peak by default) on the decode: margins, fit, risk; at the request ``at`` (the
    target by default) with the target's margins and risk, as the serving predictor pads one."""
    share = risk / (of or _measured(cal))
    finding = Finding(kind, "DecodingStage", Quantity.MEMORY, "", (), risk=risk, share=share)
    checked = Checked((finding,), fits)
    margins = stage_margins(formulas, checked, (), DEFAULT_MARGIN)
    result = estimate(
        list(cal.records),
        formulas,
        target=cal.shapes.target if at is None else at,
        margin=DEFAULT_MARGIN,
        component_weight_bytes=cal.component_weight_bytes,
        stage_margins={m.stage: m.margin for m in margins if m.source in EARNED},
    )
    return with_risks(result, checked.findings, margins)


def _kind(share: float, other: FindingKind) -> FindingKind:
    """A residual below the material share, another quantified kind above it (as classify)."""
    return FindingKind.RESIDUAL if share < MATERIAL[Quantity.MEMORY] else other


def _below(params: Mapping[str, object], target: Mapping[str, object]) -> bool:
    return all(int(params[k]) <= int(target[k]) for k in ("frames", "height", "width"))  # type: ignore[call-overload]


@settings(max_examples=25, deadline=None)
@given(
    low=st.floats(0.0, 0.02),
    gap=st.floats(0.0, 0.01),
    other=st.sampled_from(sorted(QUANTIFIED - {FindingKind.RESIDUAL})),
)
@example(low=0.0045, gap=0.001, other=FindingKind.FORMULA_MISMATCH)  # across the material share
def test_the_bound_is_continuous_and_monotone_in_the_risk(
    calibrated: Calibration,
    formulas: Pipeline,
    fits: tuple[StageFit, ...],
    low: float,
    gap: float,
    other: FindingKind,
) -> None:
    cal, peak = calibrated, _measured(calibrated)
    high = low + gap
    bounds = []
    for share in (low, high):
        result = _bounded(cal, formulas, fits, _kind(share, other), share * peak)
        bounds.append(result.phase(DECODE).peak.bound_bytes or 0)
        # never under a measured peak at any size no larger than the target (the target's too)
        for record in (*cal.records, *cal.target_runs):
            if record.ok and _below(record.params, cal.shapes.target):
                phase = next(p for p in record.phases if p.stage == "DecodingStage")
                assert bounds[-1] >= phase.peak_allocated, (share, record.params)
        assert (result.request_peak.bound_bytes or 0) >= bounds[-1]
    # monotone (within the rounding of two ceilings: below the floor, the risk takes the place
    # of the floor's padding byte for byte), and never a step: it moves by the risk's change
    assert bounds[0] <= bounds[1] + 2
    assert bounds[1] - bounds[0] <= math.ceil((high - low) * peak) + 1


def _growing(fits: tuple[StageFit, ...]) -> float:
    """The decode's growing part at the target (its largest phase's): what its margin pads."""
    return max(
        f.growing_at_target
        for f in fits
        if f.stage == "DecodingStage" and f.quantity == Quantity.MEMORY
    )


#: A request beyond the target (8x its decode's growing part), served with the target's margins.
BEYOND = {"steps": 2, "frames": 48, "height": 192, "width": 192}


@settings(max_examples=20, deadline=None)
@given(
    low=st.floats(0.0, 0.03),
    gap=st.floats(0.0, 0.01),
    of=st.floats(0.2, 2.0),
    other=st.sampled_from(sorted(QUANTIFIED - {FindingKind.RESIDUAL})),
)
# the served re-fit's case: a risk under the floor, its share of a peak under the growing part
@example(low=0.0001, gap=0.0004, of=0.45, other=FindingKind.FORMULA_MISMATCH)
def test_the_bound_never_falls_as_the_risk_grows_at_the_target_or_beyond(
    calibrated: Calibration,
    formulas: Pipeline,
    fits: tuple[StageFit, ...],
    low: float,
    gap: float,
    of: float,
    other: FindingKind,
) -> None:
    # the risk is bytes at the target added alike at every request, the margin multiplies each
    # request's growing part: a margin that fell as the risk grew would narrow a bound beyond
    growing = max(
        f.growing_at_target
        for f in fits
        if f.stage == "DecodingStage" and f.quantity == Quantity.MEMORY
    )
    for at in (BEYOND, None):
        bounds: list[list[int]] = []
        for fraction in (low, low + gap):
            risk = fraction * growing
            kind = _kind(risk / (of * growing), other)
            result = _bounded(calibrated, formulas, fits, kind, risk, of * growing, at)
            peaks = [p.peak for p in result.phases if p.stage == "DecodingStage"]
            peaks.append(result.request_peak)
            assert all(p.bound_bytes is not None for p in peaks)
            bounds.append([p.bound_bytes or 0 for p in peaks])
            if at is None:  # at the target, every phase pads at least the risk over its raw
                assert all((p.bound_bytes or 0) - (p.raw_bytes or 0) >= risk for p in peaks)
        for before, after in zip(*bounds):
            # it moves by the risk's change, within the rounding of a ceiling
            assert before <= after <= before + math.ceil(gap * growing) + 1, (at, bounds)


def test_no_step_between_a_residual_and_a_finding_to_act_on(
    calibrated: Calibration, formulas: Pipeline, fits: tuple[StageFit, ...]
) -> None:
    cal, peak = calibrated, _measured(calibrated)
    under = _bounded(cal, formulas, fits, FindingKind.RESIDUAL, 0.009 * peak).phase(DECODE)
    over = _bounded(cal, formulas, fits, FindingKind.FORMULA_MISMATCH, 0.011 * peak).phase(DECODE)
    assert under.peak.bound_bytes is not None and over.peak.bound_bytes is not None
    # both under the 2 % floor: the risk takes the floor's place, so the bound is flat across
    assert 0 <= over.peak.bound_bytes - under.peak.bound_bytes <= 0.003 * peak
    assert over.peak.bound_bytes <= 1.05 * peak


@pytest.mark.parametrize("kind", [FindingKind.ITERATION_MISMATCH, FindingKind.UNCONFIRMED])
def test_a_finding_not_quantified_keeps_the_fixed_margin(
    formulas: Pipeline, fits: tuple[StageFit, ...], kind: FindingKind
) -> None:
    quantity = Quantity.ITERATIONS if kind == FindingKind.ITERATION_MISMATCH else Quantity.MEMORY
    finding = Finding(kind, "DecodingStage", quantity, "", (), risk=1.0, share=1e-6)
    margins = {m.stage: m for m in stage_margins(formulas, Checked((finding,), fits), (), 1.2)}
    assert margins["DecodingStage"].source == MarginSource.FIXED
    assert margins["DecodingStage"].margin == 1.2
    assert margins["DenoisingStage"].source == MarginSource.EVIDENCE
