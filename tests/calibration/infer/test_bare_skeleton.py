"""`dslc infer` from a bare skeleton (issue 43 item 10): a tiny SD 1.5 factory module with no
`WARMUP`, a skeleton with params (no ranges), `call` facts and `probe height, width`, no `--base`.
The base is the cheapest admissible size, not the default workload; the ladder is bounded; the
progress is labelled `infer` with a total that never changes; the draft passes `dslc check` and
its comments give the JSON's numbers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.cli.infer import infer
from calibration.cli.infer_inputs import checked_base
from calibration.infer.ladder import plan
from calibration.infer.measure import load
from calibration.infer.run import BASE_REPEATS, RECHECKS
from dslc.compiler import compile_text

BARE = """pipeline bare_sd {
    param steps: int = 50
    param height: int = 512 where height % 8 == 0
    param width: int = 512 where width % 8 == 0
    param cfg: bool = true

    call num_inference_steps = steps
    call height = height
    call width = width
    call guidance_scale = if cfg then 7.5 else 1
    probe height, width
}
"""
#: The ladder's most sizes from a bare skeleton of three int params (both parts).
MOST_SIZES = 20
CHEAPEST = {"steps": 1, "height": 8, "width": 8, "cfg": True}
FACTORY = "from calibration.examples.tiny_sd import build, call_kwargs\n"


def test_the_base_of_a_bare_skeleton_is_its_cheapest_size_not_the_default():
    sk = load(BARE, "bare_sd", "<skeleton>")
    origins = [("WARMUP of bare", {}), ("--base", {})]
    assert checked_base(sk, origins) == CHEAPEST
    assert len(plan(sk, CHEAPEST)) <= MOST_SIZES
    given = checked_base(sk, [("--base", {"steps": 2})])
    assert given == {**CHEAPEST, "steps": 2}


@pytest.mark.slow
def test_a_bare_skeleton_drafts_the_tiny_sd_on_a_bounded_ladder(tmp_path: Path):
    pytest.importorskip("diffusers")
    (tmp_path / "bare_factory.py").write_text(FACTORY)
    (tmp_path / "bare.wf").write_text(BARE)
    draft = tmp_path / "draft.wf"
    args = [
        "--pipeline",
        f"{tmp_path / 'bare_factory.py'}:build",
        "--params",
        str(tmp_path / "bare.wf"),
        "-o",
        str(draft),
        "--json",
    ]
    result = CliRunner().invoke(infer, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["base"] == CHEAPEST
    assert len(report["sizes"]) <= MOST_SIZES + RECHECKS
    assert all(int(s["params"]["steps"]) <= 1 + 4 for s in report["sizes"])
    progress = re.findall(r"^infer \[(\d+)/(\d+)\]", result.stderr, re.MULTILINE)
    totals = {int(total) for _, total in progress}
    assert len(totals) == 1, totals  # announced up front, never grown
    (total,) = totals
    assert (
        max(int(step) for step, _ in progress) <= total <= 3 * MOST_SIZES + BASE_REPEATS + RECHECKS
    )
    text = draft.read_text()
    assert compile_text(text, str(draft)).ok
    for stage in report["stages"]:
        memory = stage["memory"]
        if not memory["terms"]:
            continue
        said = (
            f"largest residual {round(memory['largest_residual'])} B, {memory['sets_tried']} sets"
        )
        assert said in text, (said, text)
        for part in memory["at_default"]:
            term = part["term"]  # a conditional term in parentheses
            shown = f"{part['coefficient']:.6g} B x " + (
                f"({term})" if term.startswith("if ") else term
            )
            if part["term"] == "constant":
                shown = f"constant {part['coefficient']:.6g} B"
            assert shown in text, (shown, text)
