"""`dslc infer --axis`: the params declared on the command line instead of a skeleton file.

The skeleton the axes make is the hand-written one (after `dslc fmt`); a real run from the axes
drafts what the run from the file drafts; a text that cannot be placed is a usage error (2)
naming its bad part, a skeleton the compiler refuses is exit 1 naming --axis.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.cli.infer import infer as command
from calibration.infer.axes import AxisError, parse_axis, skeleton_text
from dslc.fmt import format_source
from dslc.source import SourceFile

SKELETONS = Path(__file__).resolve().parents[1] / "data" / "skeletons"

#: The flux skeleton (tests/calibration/data/skeletons/flux.wf) as axes.
FLUX = (
    "steps=28 in [1, 1000] -> num_inference_steps",
    "height=1024 in [16, 4096] where height % 16 == 0 -> height probe",
    "width=1024 in [16, 4096] where width % 16 == 0 -> width probe",
    "cfg=false -> true_cfg_scale=4 else 1",
)
#: The Wan skeleton as axes: a frame-like contract, spaces and `_` as the CLI's points take them.
WAN = (
    "steps = 50 in [1, 1_000] -> num_inference_steps",
    "frames=81 in [1,1021] where frames % 4 == 1 -> num_frames",
    "height=480 in [16, 4096] where height % 16 == 0 -> height probe",
    "width=832 in [16, 4096] where width % 16 == 0 -> width probe",
    "cfg=true -> guidance_scale=5 else 1",
)

#: The SD skeleton as docs/tutorial.md section 8 writes its axes.
SD = (
    "steps=50 in [1, 1000] -> num_inference_steps",
    "height=512 in [8, 4096] where height % 8 == 0 -> height probe",
    "width=512 in [8, 4096] where width % 8 == 0 -> width probe",
    "cfg=true -> guidance_scale=7.5 else 1",
)


def _formatted(text: str) -> str:
    return format_source(SourceFile("skeleton", text))


def _hand(file: str) -> str:
    lines = (SKELETONS / file).read_text().splitlines()
    return "\n".join(line for line in lines if not line.startswith("#")) + "\n"


@pytest.mark.parametrize(
    ("file", "name", "axes"),
    [
        ("flux.wf", "flux1_dev", FLUX),
        ("wan.wf", "wan2_1_t2v_1_3b", WAN),
        ("custom_sd.wf", "custom_sd", SD),
    ],
)
def test_the_axes_make_the_hand_written_skeleton(file, name, axes):
    made = skeleton_text(name, [parse_axis(a) for a in axes])
    assert _formatted(made) == _formatted(_hand(file))


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("steps", "NAME=DEFAULT"),
        ("2steps=4", "'2steps'"),
        ("steps=four", "'four'"),
        ("steps=4 in [1 1000]", "in [LO, HI]"),
        ("steps=4 in [1, x]", "'x'"),
        ("steps=4 on [1, 9]", "'on [1, 9]'"),
        ("steps=4 where", "condition"),
        ("steps=4 -> 9x", "'9x'"),
        ("steps=4 -> n=a else b", "bool"),
        ("cfg=true in [0, 1]", "bool"),
        ("cfg=true probe", "probe"),
        ("steps=4 } pipeline x", "'}'"),
        ("steps=4 # note", "'#'"),
        ("s=1" + " " * 400, "characters"),
    ],
)
def test_an_axis_that_cannot_be_placed_names_its_bad_part(text, names):
    with pytest.raises(AxisError) as caught:
        parse_axis(text)
    assert names in str(caught.value)
    result = CliRunner().invoke(command, ["--example", "flux", "--axis", text])
    assert result.exit_code == 2 and names in result.output, result.output


def test_params_and_axes_exactly_one_and_a_refused_skeleton_is_exit_1(tmp_path):
    both = ["--example", "flux", "--params", str(SKELETONS / "flux.wf"), "--axis", FLUX[0]]
    result = CliRunner().invoke(command, both)
    assert result.exit_code == 2 and "--params" in result.output and "--axis" in result.output
    result = CliRunner().invoke(command, ["--example", "flux"])
    assert result.exit_code == 2 and "--axis" in result.output
    result = CliRunner().invoke(
        command, ["--example", "flux", "--params", str(SKELETONS / "flux.wf"), "--name", "x"]
    )
    assert result.exit_code == 2 and "--name" in result.output
    # well placed, but the compiler refuses it: a default outside its range, an unknown name
    for axes, says in (
        (["steps=0 in [1, 9]"], "steps"),
        (["steps=2 in [1, 9] -> num_inference_steps=stepz"], "stepz"),
    ):
        args = ["--example", "flux", "-o", str(tmp_path / "d.wf")]
        result = CliRunner().invoke(command, [*args, *(f"--axis={a}" for a in axes)])
        assert result.exit_code == 1, result.output
        assert "--axis" in result.output and says in result.output
        assert not (tmp_path / "d.wf").exists()


@pytest.mark.slow
def test_a_run_from_the_axes_drafts_what_the_skeleton_file_drafts(tmp_path):
    pytest.importorskip("diffusers")

    drafts = []
    skeleton = tmp_path / "flux.wf"
    skeleton.write_text(_hand("flux.wf"))  # without its comment: a draft keeps the skeleton's
    for source in (
        ["--params", str(skeleton)],
        [f"--axis={a}" for a in FLUX],
    ):
        out = tmp_path / "draft.wf"
        result = CliRunner().invoke(command, ["--example", "flux", *source, "-o", str(out)])
        assert result.exit_code == 0, result.output
        header, *body = out.read_text().splitlines()
        drafts.append(body)
    assert header.endswith("from --example flux and --axis: review each proposal.")
    assert drafts[0] == drafts[1], [(a, b) for a, b in zip(*drafts, strict=False) if a != b]
    assert any(line.startswith("    stage DenoisingStage") for line in drafts[1])


PIECES = st.sampled_from(
    [
        "steps",
        "=",
        "4",
        "true",
        " in [",
        "1",
        ", ",
        "9",
        "]",
        " where ",
        "steps % 2 == 0",
        " -> ",
        "arg",
        "=",
        " else ",
        " probe",
        "{",
        "#",
        "\n",
        "-",
        "_",
        "x",
        " ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(PIECES, st.text(max_size=6)), max_size=14))
def test_any_axis_text_is_an_axis_or_an_axis_error_and_compiles_or_diagnoses(parts):
    from dslc.compiler import compile_text

    text = "".join(parts)
    try:
        axis = parse_axis(text)
    except AxisError as exc:
        assert str(exc)
        return
    made = skeleton_text("p", [axis])
    assert made.count("\n") <= 6  # one param, one call, one probe line at most: nothing leaks
    compile_text(made, "<--axis>")  # a diagnostic or a pipeline, never an exception
