"""The planner's inputs account for every component: each phase's activations are its bound less
the weights that were on the device at its peak, and a component no phase saw is charged its full
weights in every phase (never planned as costing nothing)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibration.plan import Device, PlacementKind, solve
from calibration.plan.inputs import CalibrationFormatError, load_calibration

KiB = 1024
WEIGHTS = {"tower": 500 * KiB, "denoiser": 200 * KiB, "spare": 100 * KiB}


def _document(*, offloaded: bool = True, unobserved: tuple[str, ...] = ()) -> dict:
    """A calibration measured under model offload: each phase's peak holds only its component."""

    def weights(name: str) -> int | None:
        return WEIGHTS[name] if offloaded else None

    return {
        "version": 1,
        "target": {"steps": 4},
        "component_weight_bytes": dict(WEIGHTS),
        "phases": [
            {
                "label": "stage:TextEncodingStage",
                "stage": "TextEncodingStage",
                "active_components": ["tower"],
                "bound_peak_bytes": WEIGHTS["tower"] + 10 * KiB,
                "weights_bytes": weights("tower"),
            },
            {
                "label": "stage:DenoisingStage",
                "stage": "DenoisingStage",
                "active_components": ["denoiser"],
                "bound_peak_bytes": WEIGHTS["denoiser"] + 60 * KiB,
                "weights_bytes": weights("denoiser"),
            },
        ],
        "unobserved_components": list(unobserved),
    }


def test_each_phase_loses_the_weights_it_held_not_every_weight():
    target = load_calibration(_document()).target
    assert [p.bound_bytes for p in target.phases] == [10 * KiB, 60 * KiB]
    # read as before offloading existed (every weight on the device), the peaks would hold nothing
    older = load_calibration(_document(offloaded=False)).target
    assert [p.bound_bytes for p in older.phases] == [0, 0]


def test_an_unobserved_component_is_active_in_every_phase():
    target = load_calibration(_document(unobserved=("spare",))).target
    assert all("spare" in p.active_components for p in target.phases)
    assert target.uses["spare"] == 2  # onloaded once a stage when offloaded


@given(capacity=st.integers(min_value=620, max_value=2000))
def test_an_unobserved_component_never_costs_nothing(capacity):
    cal = load_calibration(_document(unobserved=("spare",)))
    plan = solve(cal.components, (cal.target,), Device(capacity * KiB, reserve_bytes=0))
    assert plan.feasible, plan.reason
    held = {u.label: u.weights_bytes for u in plan.phases}
    assert held["stage:TextEncodingStage"] >= WEIGHTS["tower"] + WEIGHTS["spare"]
    assert held["stage:DenoisingStage"] >= WEIGHTS["denoiser"] + WEIGHTS["spare"]
    moved = plan.placement("spare").kind is not PlacementKind.RESIDENT
    assert plan.transfer_bytes >= moved * 2 * WEIGHTS["spare"]  # onloaded in both stages


def test_an_unknown_unobserved_component_is_refused():
    with pytest.raises(CalibrationFormatError, match="unobserved_components: unknown component"):
        load_calibration(_document(unobserved=("nobody",)))
