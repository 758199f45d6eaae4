"""Mutation fuzzing of calibration documents and of `dslc calibrate` / `dslc plan` option lists,
derandomized and small for CI (the long run is `bench/fuzz.py --kinds calibration,options`).

Contract (calibration.fuzzing.mutate): exit 0, 1, 2, 4 or 5, never 3 or an escaping exception. The
seconds per case are bench/fuzz.py's measure; here a case's work is bounded by its peak Python
allocation (tracemalloc), never by the clock. Mutations that grow the planner's problem
(``SIZE_MUTATORS``) are bench/fuzz.py's: the planner's bounds decide how fast those end.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.fuzzing import mutate as fuzzing
from calibration.fuzzing import plan as fuzzing_plan

HERE = Path(__file__).resolve().parent
REAL = json.loads((HERE / "data" / "flux_calibration.json").read_text())  # dslc calibrate --save
FORMULAS = str(HERE / "data" / "custom_sd.wf")
MiB = 1 << 20

FUZZ = settings(
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=True,
)
SEEDS = st.integers(0, 2**64 - 1)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    return fuzzing.Sandbox(tmp_path_factory.mktemp("fuzz"))


def bounded(work):
    """``work()`` with its peak Python allocation under 256 MiB."""
    tracemalloc.start()
    try:
        work()
        assert tracemalloc.get_traced_memory()[1] < 256 * MiB
    finally:
        tracemalloc.stop()


def test_the_real_document_plans(sandbox):
    path = sandbox.root / "real.json"
    path.write_text(json.dumps(REAL))
    args = fuzzing.plan_options(sandbox, str(path), FORMULAS)
    fuzzing.run_dslc(args, "calibration", "none", seconds=None)


@FUZZ
@given(seed=SEEDS)
def test_mutated_documents_are_planned_or_refused(sandbox, seed):
    mutation, text = fuzzing.mutate_document(random.Random(seed), REAL, sizes=False)
    path = sandbox.root / "doc.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    args = fuzzing.plan_options(sandbox, str(path), FORMULAS)
    bounded(lambda: fuzzing.run_dslc(args, "calibration", mutation, seconds=None))


@FUZZ
@given(seed=SEEDS, command=st.sampled_from(["calibrate", "plan-saved", "plan-run"]))
def test_mutated_option_lists_end_in_a_typed_exit(sandbox, seed, command):
    rng = random.Random(seed)
    saved = sandbox.root / "saved.json"
    saved.write_text(json.dumps(REAL))
    if command == "calibrate":
        base = fuzzing.calibrate_options(sandbox, FORMULAS)
    else:
        base = fuzzing.plan_options(
            sandbox, str(saved) if command == "plan-saved" else None, FORMULAS
        )
    mutation, args = fuzzing.mutate_options(rng, base, sandbox)
    bounded(lambda: fuzzing.run_dslc(args, "options", mutation, seconds=None))


def test_the_unmutated_calibrate_options_stop_where_the_pipeline_is_built(sandbox):
    from click.testing import CliRunner

    from dslc.cli import cli

    result = CliRunner().invoke(cli, fuzzing.calibrate_options(sandbox, FORMULAS))
    assert result.exit_code == 1, result.output
    assert "it called sys.exit('fuzz: stopped where the pipeline is built" in result.output


@pytest.fixture(scope="module")
def seed_plan():
    return fuzzing_plan.real_plan(HERE / "data" / "flux_calibration.json")


def test_the_seed_plan_has_every_placement_kind_and_is_read_back(sandbox, seed_plan):
    kinds = {c["placement"] for c in seed_plan["components"]}
    assert kinds == {"resident", "offloaded", "layerwise"}
    layers = fuzzing_plan.layers_of(seed_plan)
    text = json.dumps(seed_plan)
    fuzzing_plan.check_plan_file(text, "none", sandbox, layers, FORMULAS, seconds=None)
    from calibration.plan.saved import read_plan

    assert read_plan(sandbox.root / "plan.json").placement()["transformer"] == "layerwise 1/2"


@FUZZ
@given(seed=SEEDS)
def test_mutated_plan_files_are_read_or_refused(sandbox, seed_plan, seed):
    mutation, text = fuzzing.mutate_document(random.Random(seed), seed_plan)
    layers = fuzzing_plan.layers_of(seed_plan)
    bounded(
        lambda: fuzzing_plan.check_plan_file(
            text, mutation, sandbox, layers, FORMULAS, seconds=None
        )
    )
