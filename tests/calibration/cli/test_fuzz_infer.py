"""Fuzzing `dslc infer`, derandomized and small for CI (the long run is `bench/fuzz.py --kinds
infer`): random skeletons, axes, bases, factories and options end in exit 0, 1, 2, 4 or 5, never 3
or an escaping exception (calibration.fuzzing.infer). Here a case's work is bounded by its peak
Python allocation (tracemalloc), never by the clock; the cases that run the toy pipeline through
the whole inference are a few fixed ones."""

from __future__ import annotations

import random
import tracemalloc

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibration.fuzzing import infer as fuzzing_infer
from calibration.fuzzing import mutate as fuzzing
from dslc.cli import cli

MiB = 1 << 20
FUZZ = settings(
    max_examples=40,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    return fuzzing.Sandbox(tmp_path_factory.mktemp("fuzz-infer"))


def bounded(args: list[str], mutation: str) -> None:
    """`dslc ARGS` ends in a typed exit with its peak Python allocation under 256 MiB."""
    tracemalloc.start()
    try:
        fuzzing.run_dslc(args, "infer", mutation, seconds=None)
        assert tracemalloc.get_traced_memory()[1] < 256 * MiB
    finally:
        tracemalloc.stop()


@FUZZ
@given(seed=st.integers(0, 2**64 - 1), index=st.integers(0, 10**6))
def test_fuzzed_command_lines_stopped_at_the_pipeline_end_in_a_typed_exit(sandbox, seed, index):
    index -= index % fuzzing_infer.RUN_EVERY  # never a case that runs the toy
    mutation, args = fuzzing_infer.infer_case(random.Random(seed), index, sandbox)
    assert fuzzing.STOP_FACTORY in args
    bounded(args, mutation)


@pytest.mark.parametrize("seed", range(4))
def test_fuzzed_command_lines_running_the_toy_end_in_a_typed_exit(sandbox, seed):
    index = fuzzing_infer.RUN_EVERY - 1
    mutation, args = fuzzing_infer.infer_case(random.Random(f"ci:{seed}"), index, sandbox)
    assert fuzzing.STOP_FACTORY not in args
    bounded(args, mutation)


def test_the_toy_drafts_from_the_warm_up_skeleton(sandbox):
    skeleton = sandbox.root / "warm.wf"
    skeleton.write_text(fuzzing_infer.WARM_SKELETON)
    args = ["infer", "--pipeline", "calibration.fuzzing.infer:toy", "--params", str(skeleton)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 5), result.output
    assert "stage DenoisingStage uses unet per step" in result.stdout
