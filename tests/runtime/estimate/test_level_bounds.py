"""A weights level's bound where its series bends past the measured sizes, numbers by hand.

The toy's denoising phase (``memory ~ size``, target 100) under group offload: a 100 B group holds
the phase's own activations' peak, ``100 + 30 x size`` (as the formula says, at every size), a
1000 B group a level whose peak is ``50 + 20 x size`` at sizes 10 and 20 (250, 450: 250 B under the
phase's own there) and then moves to another op, as the tiny FLUX's transformer under
``transformer_blocks.0`` (1,816 B a token over 16-36 tokens, 2,330 past them): at 100 it grows as
the phase's own activations do from 20, ``450 + 30 x 80`` = 2,850. True peak: 1000 + 2,850 = 3,850
(the 100 B group: 100 + 3,100 = 3,200).
"""

from __future__ import annotations

from attrs import evolve

from runtime.estimate import estimate_peak_bytes, estimate_phase_peaks
from runtime.record import Phase
from tests.runtime.estimate.conftest import record, stage

DENOISE = "stage:DenoisingStage"
SMALL, BIG = 100, 1000
WEIGHTS = {"transformer": 10**6}  # never on the device whole


def _phase(size: int, big: int) -> Phase:
    """The denoising phase at ``size``: its activations ``big`` under the big group."""
    levels = ((SMALL, 100 + 30 * size), (BIG, big))
    held = stage("DenoisingStage", BIG + big, active=["transformer"])
    own = max(a for _, a in levels)
    return evolve(held, weights_bytes=BIG, activations_bytes=own, weight_levels=levels)


def _records(bigs: dict[int, int]):
    return [
        record({"size": s}, phases=[_phase(s, b)], peak=BIG + b) for s, b in sorted(bigs.items())
    ]


def _denoise(records, toy):
    phases = estimate_phase_peaks(records, toy, component_weight_bytes=WEIGHTS)
    return {p.label: p.peak for p in phases}[DENOISE]


def test_a_level_bending_past_the_sizes_is_bounded_by_the_phases_own_activations(toy):
    # The big level's fit: (10, 1250) and (20, 1450), 1050 + 20 x size: raw 3,050, bound 1050 +
    # 1.2 x 2000 = 3,450. The small group's: (10, 500) and (20, 800), 200 + 30 x size: raw 3,200,
    # bound 200 + 3,600 = 3,800. Both bounds under the true 3,850. The phase's own activations on
    # the big group's weights: (10, 1400) and (20, 1700), 1100 + 30 x size, bound 1100 + 3,600 =
    # 4,700; the big level lay 1700 - 1450 = 250 B under it at size 20: its bound 4,450 (never
    # above 4,700). The raw figure stays the levels' fits: 3,200.
    records = _records({10: 250, 20: 450})
    peak = _denoise(records, toy)
    assert (peak.method, peak.raw_bytes, peak.bound_bytes) == ("fit", 3200, 4450)
    assert peak.bound_bytes >= 3850
    assert "the bound with 1000 B: " in peak.reason
    assert "less the 250 B the level lay under it at 20 " in peak.reason
    assert peak.lift_bytes == 4450 - 3450  # over the big level's own padded fit: what it says
    request = estimate_peak_bytes(records, toy, component_weight_bytes=WEIGHTS)
    assert (request.raw_bytes, request.bound_bytes) == (3200, 4450)


def test_the_cover_reads_the_gap_at_the_size_nearest_the_target(toy):
    # A third size, 5, lay further under (50 + 20 x 5 = 150 against 250, 100 B under): the gap at
    # the nearest size, 20, still decides it (250 B): 4,450, the same bound.
    records = _records({5: 150, 10: 250, 20: 450})
    assert _denoise(records, toy).bound_bytes == 4450


def test_a_level_that_is_the_phases_own_activations_keeps_its_bound(toy):
    # The big group holds the phase's own activations' peak (its level 100 + 40 x size: 500, 900
    # over the small group's 400, 700): no gap, the cover is that fit's own bound, 1000 + 100 +
    # 1.2 x 4000 = 5,900; the raw 1,100 + 4,000 = 5,100.
    records = _records({10: 500, 20: 900})
    peak = _denoise(records, toy)
    assert (peak.raw_bytes, peak.bound_bytes) == (5100, 5900)
    assert "less the" not in peak.reason
    assert peak.lift_bytes == 0


def test_a_record_without_the_activations_own_peak_reads_its_highest_level(toy):
    # A record from a file may hold the levels without ``activations_bytes``: the phase's own
    # activations are then its highest level's (the small group's here), the same 4,450.
    records = [
        evolve(r, phases=tuple(evolve(p, activations_bytes=None) for p in r.phases))
        for r in _records({10: 250, 20: 450})
    ]
    assert _denoise(records, toy).bound_bytes == 4450
