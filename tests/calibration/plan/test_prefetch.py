"""A component being prefetched (onloaded ahead while another computes) is present but inactive:
the phase charges it once, and the prefetch is not a second onload (the peer's "prefetch peak
attributed to the prefetched component": an encode stage while the transformer is prefetched,
then the denoise stage that runs it)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from calibration.lifecycle.exchange import dumps, loads
from calibration.plan import Component, Device, Phase, PlacementKind, Target, solve
from calibration.plan.inputs import load_calibration

KiB = 1024
WEIGHTS = {"text_encoder": 50 * KiB, "transformer": 200 * KiB}


def _document(*, prefetch_kind: str = "prefetch") -> dict:
    """Encode, a window where the transformer is onloaded ahead, denoise: offloaded weights."""
    return {
        "version": 1,
        "target": {"steps": 4},
        "component_weight_bytes": dict(WEIGHTS),
        "phases": [
            {
                "label": "stage:TextEncodingStage",
                "kind": "stage",
                "stage": "TextEncodingStage",
                "active_components": ["text_encoder"],
                "bound_peak_bytes": WEIGHTS["text_encoder"] + 150 * KiB,
                "weights_bytes": WEIGHTS["text_encoder"],
            },
            {
                "label": "prefetch:transformer",
                "kind": prefetch_kind,
                "stage": None,
                "active_components": ["transformer"],
                "bound_peak_bytes": WEIGHTS["transformer"] + 5 * KiB,
                "weights_bytes": WEIGHTS["transformer"],
            },
            {
                "label": "stage:DenoisingStage",
                "kind": "stage",
                "stage": "DenoisingStage",
                "active_components": ["transformer"],
                "bound_peak_bytes": WEIGHTS["transformer"] + 60 * KiB,
                "weights_bytes": WEIGHTS["transformer"],
            },
        ],
    }


def test_a_prefetch_window_is_presence_not_a_second_onload():
    target = load_calibration(_document()).target
    window = target.phases[1]
    assert window.active_components == () and window.prefetched == ("transformer",)
    assert window.present == ("transformer",)
    assert target.uses["transformer"] == 1  # onloaded once: the prefetch is that onload, early
    # read as a phase that runs the transformer, the window would be a second stretch of use
    assert load_calibration(_document(prefetch_kind="component")).target.uses["transformer"] == 2


def test_an_offloaded_transformer_moves_its_weights_once_a_request():
    calibrated = load_calibration(_document())
    # 320 KiB usable: encoding's activations leave no room for the transformer resident
    device = Device(capacity_bytes=(1 << 30) + 320 * KiB, reserve_bytes=1 << 30)
    plan = solve(calibrated.components, (calibrated.target,), device)
    assert plan.feasible
    transformer = plan.placement("transformer")
    assert transformer.kind is PlacementKind.OFFLOADED
    assert transformer.transfer_bytes == WEIGHTS["transformer"]
    window = next(u for u in plan.phases if u.label == "prefetch:transformer")
    # present in the window beside the resident encoder: charged once
    assert window.weights_bytes == WEIGHTS["text_encoder"] + WEIGHTS["transformer"]


@given(
    bound=st.integers(0, 100),
    weights=st.integers(1, 100),
    active=st.booleans(),
    capacity=st.integers(0, 400),
)
def test_present_components_are_charged_once_whether_active_prefetched_or_both(
    bound, weights, active, capacity
):
    """Listed active and prefetched, a component needs the same room as listed once."""
    a = Component("a", weights)
    both = Phase("p", bound, ("a",) if active else (), prefetched=("a",))
    once = Phase("p", bound, ("a",))
    device = Device(capacity_bytes=capacity, reserve_bytes=0)
    plans = [solve([a], [Target("t", (phase,))], device) for phase in (both, once)]
    assert plans[0].feasible == plans[1].feasible
    if plans[0].feasible:
        assert plans[0].phases[0].weights_bytes == plans[1].phases[0].weights_bytes
        assert plans[0].transfer_bytes == plans[1].transfer_bytes


def test_a_prefetched_component_counts_in_the_window_it_is_onloaded_in():
    """Offloaded whole, the incoming component's weights are on the device in the window: a
    window whose activations leave no room for them cannot prefetch it."""
    a, b = Component("a", 100), Component("b", 100)
    target = Target(
        "t",
        (Phase("encode", 50, ("a",), prefetched=("b",)), Phase("denoise", 0, ("b",))),
    )
    plan = solve([a, b], [target], Device(capacity_bytes=249, reserve_bytes=0))
    assert not plan.feasible  # 100 + 100 + 50 > 249: both are in the encode window
    plan = solve([a, b], [target], Device(capacity_bytes=250, reserve_bytes=0))
    assert plan.feasible and plan.phases[0].weights_bytes == 200


def test_ranks_exchange_the_prefetched_components():
    target = Target("t", (Phase("encode", 5, ("a",), prefetched=("b",)),))
    components = (Component("a", 10), Component("b", 10))
    device = Device(capacity_bytes=100, reserve_bytes=0)
    assert loads(dumps(components, (target,), device))[1] == (target,)


def test_ranks_exchange_whole_components_transitions_and_host_memory():
    phase = Phase("fuse", 5, ("a",), whole_components=("b",), transition_bytes=7, prefetched=("a",))
    target = Target("t", (phase,))
    components = (Component("a", 10), Component("b", 10))
    device = Device(capacity_bytes=100, reserve_bytes=0, host_memory_bytes=1 << 30)
    assert loads(dumps(components, (target,), device)) == (components, (target,), device)
