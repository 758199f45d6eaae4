"""The serving-worker adapter: (measured, target) per stage from plain batch objects."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from runtime import FormulaBook, InadmissibleError, ParamTypeError
from runtime.adapter import BatchParams, StageIterationRecorder, default_workload_iterations


@dataclass
class Batch:
    num_frames: int | None = None
    height: int | None = None
    width: int | None = None


def test_callable_per_stage_reads_the_batch(book: FormulaBook) -> None:
    wan = book["wan2_2_t2v_a14b"]
    denoise = default_workload_iterations(wan, "DenoisingStage")
    batch = SimpleNamespace(num_frames=17, height=480, width=832)
    assert denoise(batch, 4) == (4, 40)
    assert default_workload_iterations(wan, "TextEncodingStage")(batch, 4) == (1, 1)
    assert denoise.has_formula


def test_absent_or_none_attributes_take_defaults(book: FormulaBook) -> None:
    denoise = default_workload_iterations(book["wan2_2_t2v_a14b"], "DenoisingStage")
    assert denoise(SimpleNamespace(), 8) == (8, 40)
    assert denoise(Batch(num_frames=None, height=None), 8) == (8, 40)
    assert denoise(Batch(), None) == (40, 40)


def test_params_the_pipeline_lacks_are_skipped(book: FormulaBook) -> None:
    minimax = default_workload_iterations(book["minimax_h3"], "DenoisingStage")
    assert minimax(Batch(num_frames=80, height=7, width=7), 4) == (3, 49)  # no shape params at all


def test_dmd_ignores_steps(book: FormulaBook) -> None:
    assert default_workload_iterations(book["wan2_1_t2v_dmd"], "DenoisingStage")(Batch(), 2) == (
        4,
        4,
    )


def test_stage_without_a_formula_answers_none(book: FormulaBook) -> None:
    image = default_workload_iterations(book["wan2_2_t2v_a14b"], "ImageEncodingStage")
    assert not image.has_formula
    assert image(Batch(), 4) is None
    assert default_workload_iterations(None, "DenoisingStage")(Batch(), 4) is None
    assert default_workload_iterations(book["wan2_2_i2v_a14b"], "ImageEncodingStage")(
        Batch(), 4
    ) == (1, 1)


def test_custom_attribute_mapping(book: FormulaBook) -> None:
    mapping = BatchParams({"frames_in": "frames", "guidance": "cfg"}, steps_param=None)
    wan = book["wan2_2_t2v_a14b"]
    batch = SimpleNamespace(frames_in=21, guidance=False, num_frames=80)
    assert mapping.params_for(wan, batch, 4) == {"frames": 21, "cfg": False}
    assert default_workload_iterations(wan, "DenoisingStage", mapping)(batch, 4) == (40, 40)
    assert BatchParams() == BatchParams(
        {"num_frames": "frames", "height": "height", "width": "width"}, "steps"
    )


def test_inadmissible_or_mistyped_batches_raise_typed_errors(book: FormulaBook) -> None:
    denoise = default_workload_iterations(book["wan2_2_t2v_a14b"], "DenoisingStage")
    with pytest.raises(InadmissibleError, match="frames = 80 violates `frames % 4 == 1`"):
        denoise(Batch(num_frames=80), 4)
    with pytest.raises(ParamTypeError):
        denoise(Batch(height=720.0), 4)  # type: ignore[arg-type]


def test_recorder_explicit_wins_and_is_never_overwritten(book: FormulaBook) -> None:
    recorder = StageIterationRecorder(book["wan2_2_t2v_a14b"])
    batch = Batch(num_frames=17, height=480, width=832)
    assert recorder.record_from_formula("DenoisingStage", batch, 4) == (4, 40)
    recorder.record_explicit("DenoisingStage", 3, 30)  # an explicit record replaces a formula one
    assert recorder.record_from_formula("DenoisingStage", batch, 4) is None  # ...and is kept
    assert recorder.records["DenoisingStage"] == (3, 30)
    assert recorder.is_explicit("DenoisingStage")
    recorder.record_explicit(
        "DenoisingStage", 5, 50
    )  # a later explicit record replaces an earlier one
    assert recorder.records["DenoisingStage"] == (5, 50)


def test_recorder_skips_stages_without_a_formula(book: FormulaBook) -> None:
    recorder = StageIterationRecorder(book["wan2_2_t2v_a14b"])
    assert recorder.record_from_formula("ImageEncodingStage", Batch(), 4) is None
    assert recorder.records == {}
    recorder.record_explicit("CustomLoopStage", 7, 7)  # explicit records need no formula
    assert recorder.record_from_formula("TextEncodingStage", Batch(), 4) == (1, 1)
    assert recorder.records == {"CustomLoopStage": (7, 7), "TextEncodingStage": (1, 1)}
    assert not recorder.is_explicit("TextEncodingStage")


def test_recorder_without_formulas_records_only_explicit() -> None:
    recorder = StageIterationRecorder(None)
    assert recorder.record_from_formula("DenoisingStage", Batch(), 4) is None
    recorder.record_explicit("DenoisingStage", 4, 40)
    assert recorder.records == {"DenoisingStage": (4, 40)}


def test_recorder_records_are_a_copy(book: FormulaBook) -> None:
    recorder = StageIterationRecorder(book["minimax_h3"])
    recorder.record_from_formula("DenoisingStage", Batch(), 10)
    recorder.records["DenoisingStage"] = (0, 0)
    assert recorder.records == {"DenoisingStage": (9, 49)}


@pytest.mark.parametrize(("measured", "target"), [(True, 1), (-1, 1), (1, 2.0), (1, None)])
def test_explicit_records_must_be_counts(measured: object, target: object) -> None:
    with pytest.raises(ValueError, match="must be a non-negative int"):
        StageIterationRecorder(None).record_explicit("S", measured, target)  # type: ignore[arg-type]
