"""`dslc infer --plot` (issue 43): one panel a stage, the measured sizes and each fitted term's
part; the file is a valid figure with as many panels as stages (no pixel goldens). The proposal
is built from the grammar as in test_draft_comments; the slow CLI run is in test_families."""

from __future__ import annotations

import attrs
import pytest

from calibration.cli.infer_plot import plot_inference
from calibration.infer.search import Sample
from tests.calibration.infer.test_draft_comments import DEFAULT, _decoding

pytest.importorskip("matplotlib")


def _measured():
    """The DecodingStage of the issue, measured at 5 sizes (one held out), fitted exactly."""
    stage = _decoding()
    points = [
        {**DEFAULT, "steps": s, "height": h, "width": h} for s, h in ((1, 8), (2, 8), (1, 16))
    ]
    points += [{**DEFAULT, "steps": 2, "height": 16, "width": 16}]
    values = [1000 + 461.8 * p["steps"] + 322.8 * p["height"] * p["width"] for p in points]
    samples = [Sample.at(p, v, held_out=k == 3) for k, (p, v) in enumerate(zip(points, values))]
    return attrs.evolve(stage, memory_samples=tuple(samples))


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_one_panel_a_stage_and_each_term_drawn(tmp_path, stages):
    fitted = _measured()
    unfitted = attrs.evolve(fitted, memory=attrs.evolve(fitted.memory, terms=None, slopes=()))
    proposals = [fitted, unfitted, fitted][:stages]
    path = tmp_path / "infer.svg"
    plot_inference(proposals, path)
    svg = path.read_text()
    assert svg.lstrip().startswith("<?xml") and svg.count('<g id="axes_') == stages
    assert "461.8 B x steps" in svg and "322.8 B x height * width" in svg
    assert svg.count("measured, held out") == stages  # every panel tells the checks apart
    assert ("(no fit)" in svg) == (stages > 1)


def test_a_png(tmp_path):
    path = tmp_path / "infer.png"
    plot_inference([_measured()], path)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_format_matplotlib_cannot_write_is_a_usage_error_before_anything_runs(tmp_path):
    from pathlib import Path

    from click.testing import CliRunner

    from dslc.cli import cli

    skeleton = Path(__file__).resolve().parents[1] / "data" / "skeletons" / "flux.wf"
    figure = tmp_path / "infer.nope"
    args = ["infer", "--example", "flux", "--params", str(skeleton), "--plot", str(figure)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "--plot" in result.output and "nope" in result.output
    assert not figure.exists()
