"""The lifecycle fuzzer (bench/lifecycle_fuzz.py, ``calibration.fuzzing.lifecycle``) on a handful
of drawn cases: one rank in this process, and one case on two gloo ranks; none raises but the
injected interrupt, none leaves a component other than as it was, the two ranks end alike. The
checks themselves can fail: a plan left on the pipeline is a changed component, ranks on two
statuses differ."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from calibration.fuzzing import lifecycle as fuzz
from calibration.fuzzing import lifecycle_checks as checks
from calibration.lifecycle.model import NO_PLAN_VALIDATES, OK, REFUSED
from tests.calibration.lifecycle_setup import run_ranks

pytest.importorskip("torch.multiprocessing")
pytest.importorskip("accelerate")

ROOT = str(Path(__file__).resolve().parents[3] / "formulas")
#: Drawn single-rank cases of seed 1 (on the tiny FLUX's steady clock: one calibration), and one
#: on the tiny SDXL.
INDICES = (0, 1, 2, 3, 4, 5)


def _case(index: int, example: str = "flux") -> fuzz.Case:
    return attrs.evolve(fuzz.draw(1, index, ranks=1), example=example, clock="steady")


@pytest.mark.parametrize("index", INDICES)
def test_a_drawn_case_ends_in_a_report_with_the_pipeline_as_it_was(index):
    result = fuzz.run_rank(_case(index), ROOT)
    assert "escaped" not in result, result.get("escaped")
    assert "status" in result or result.get("interrupted")
    assert checks.not_restored(result) == []


def test_each_step_is_drawn_and_the_draw_repeats():
    cases = [fuzz.draw(7, i) for i in range(200)]
    assert {c.step for c in cases} == set(fuzz.STEPS)
    assert {c.ranks for c in cases} == {1, 2}
    assert all(c.step != "late" for c in cases if c.ranks == 1)  # a late rank needs another
    assert fuzz.GROUPED_CAP in {c.capacity for c in cases}
    assert {c.kind for c in cases if c.step in ("apply", "to")} == set(fuzz.MOVE_KINDS)
    assert cases == [fuzz.draw(7, i) for i in range(200)]


def test_an_interrupt_on_sdxl_leaves_it_as_it_was():
    case = attrs.evolve(_case(0, "sdxl"), step="interrupt", stage="DenoisingStage", mode="apply")
    result = fuzz.run_rank(case, ROOT)
    assert result.get("interrupted") and checks.not_restored(result) == []


def test_an_interrupted_move_under_the_grouped_cap_leaves_the_pipeline_as_it_was():
    # the transformer's `.to()` raises KeyboardInterrupt while the plan grouping the VAE is applied
    case = attrs.evolve(
        _case(0), step="to", kind="interrupt", component="transformer", times=1, mode="apply"
    )
    result = fuzz.run_rank(attrs.evolve(case, capacity=fuzz.GROUPED_CAP), ROOT)
    assert result.get("interrupted") and checks.not_restored(result) == []


def test_a_re_warm_fault_rolls_back_and_leaves_the_pipeline_as_it_was():
    # the request after the first validation (which holds at 1 MiB) fails: the re-warm
    case = attrs.evolve(
        _case(0), step="re-warm", kind="error", stage="DenoisingStage", mode="apply"
    )
    result = fuzz.run_rank(attrs.evolve(case, capacity=1 << 20), ROOT)
    assert "escaped" not in result, result.get("escaped")
    steps = result["steps"]
    assert steps[steps.index("re-warm") + 1] == "rollback" and result["status"] == NO_PLAN_VALIDATES
    assert result["serving"] and checks.not_restored(result) == []


def test_a_plan_left_on_the_pipeline_is_a_changed_component():
    from calibration.lifecycle.steps import plan_inputs
    from calibration.plan.apply import apply
    from calibration.plan.model import Device
    from calibration.plan.solver import most_conservative

    fresh, _ = fuzz.session(ROOT, "flux", (), "steady")
    before = checks.snapshot(fresh.pipe)
    components, targets = plan_inputs(fuzz.calibration(ROOT, "flux", False))
    plan = most_conservative(components, targets, Device(1 << 20))
    applied = apply(plan, fresh.pipe, device="cpu", offload_device="cpu")
    assert checks.changed(before, fresh.pipe)
    applied.undo()
    assert checks.changed(before, fresh.pipe) == []


def test_ranks_on_two_statuses_differ():
    ok = {"status": OK, "serving": True, "placement": {"vae": "resident"}}
    assert not checks.differing([ok, dict(ok)])
    assert checks.differing([ok, {"status": REFUSED, "serving": False, "placement": {}}])
    assert checks.differing([ok, {"interrupted": True}])  # the other serves on


def test_a_request_fault_on_one_of_two_ranks_ends_both_alike_with_the_vae_grouped(tmp_path):
    case = attrs.evolve(
        fuzz.draw(1, 0, ranks=2),
        example="flux",
        rank=1,
        step="request",
        kind="out-of-memory",
        stage="DenoisingStage",
        times=1,
        clock="steady",
        mode="apply",
        capacity=fuzz.GROUPED_CAP,
    )
    (tmp_path / "case.json").write_text(json.dumps({"case": fuzz.as_dict(case), "root": ROOT}))
    ranks = run_ranks(fuzz.rank_in, tmp_path, 300)
    assert not any("escaped" in r for r in ranks)
    assert not checks.differing(ranks)
    assert ranks[0]["serving"] and ranks[0]["placement"]["vae"] == "grouped"
    assert all(checks.not_restored(r) == [] for r in ranks)


def test_a_fallback_one_rank_cannot_apply_stops_both(tmp_path):
    # found by the fuzzer (seed 1, case 9): the text encoder's moves fail on rank 1 (every try,
    # the fallback's re-apply too); rank 0 served its fallback while rank 1 refused
    case = attrs.evolve(
        fuzz.draw(1, 9),
        example="flux",
        ranks=2,
        rank=1,
        step="apply",
        kind="error",
        times=12,
        component="text_encoder",
        clock="steady",
        mode="apply",
        capacity=1 << 20,
    )
    (tmp_path / "case.json").write_text(json.dumps({"case": fuzz.as_dict(case), "root": ROOT}))
    ranks = run_ranks(fuzz.rank_in, tmp_path, 300)
    assert not any("escaped" in r for r in ranks)
    assert not checks.differing(ranks)
    assert all(r["status"] == REFUSED and not r["serving"] for r in ranks)
    assert all(checks.not_restored(r) == [] for r in ranks)
