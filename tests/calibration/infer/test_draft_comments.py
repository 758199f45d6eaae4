"""The draft's comment per stage gives the numbers of the `--json` report: each term's fitted
coefficient and its part of the stage at the default workload, the largest residual and the
sets tried (issue 43: the comment said "largest residual 0 B, 29 sets tried", the fit before a
switch's factors, while the JSON said 16,526 and 57 sets).

The proposal is built from the grammar (``calibration.infer.terms``), not measured: what is under
test is the text the draft makes of it; the slow test of ``test_bare_skeleton`` checks the same
on a measured draft.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from calibration.infer.analyse import StageProposal, Switched
from calibration.infer.draft import draft_text, line_text, stage_body
from calibration.infer.layout import StagePlan, Use
from calibration.infer.measure import load
from calibration.infer.report import _stage
from calibration.infer.search import IterationFit, Sample, TermFit
from calibration.infer.terms import Monomial, features, num
from calibration.infer.time_terms import TimeCheck, TimeChoice, TimeSource

SKELETON = (Path(__file__).resolve().parents[1] / "data" / "skeletons" / "custom_sd.wf").read_text()
DEFAULT = load(SKELETON, "custom_sd", "<skeleton>").default_workload

GOLDEN = """\
# iterations: 0 sizes, counts []
iterations = 1
# memory: fits 16 sizes (+ 12 with a switch flipped), largest residual 16526 B, 57 sets tried
# memory at the default workload (steps=50,height=512,width=512): 461.8 B x steps (0.0%); \
322.8 B x height * width (100.0%); constant 1000 B (0.0%)
memory ~ [steps, height * width]
# time per iteration: the smallest set that gives the counted work (FLOPs + 16 x bytes, op by \
op) exactly at 7 sizes, 23 sets tried, largest residual 0.5 work; the measured times: the JSON \
report
# work at the default workload (steps=50,height=512,width=512): 3.1e+06 work x height * width \
(99.9%); constant 4.5e+08 work (0.1%)
time ~ height * width
# cfg=false measured at 12 sizes (work counted): iterations the same; memory: \
[steps, height * width] x (if cfg then 2 else 1); time: the same terms, exactly"""


def _terms() -> tuple[Monomial, Monomial]:
    sk = load(SKELETON, "custom_sd", "<skeleton>")
    one = {p: features(p, sk.params[p].contracts, steps=False)[0] for p in ("steps", "height")}
    width = features("width", sk.params["width"].contracts, steps=False)[0]
    return Monomial((one["steps"],)), Monomial((one["height"], width))


def _decoding() -> StageProposal:
    """A stage whose switch refitted its memory: the base's fit (0 B, 29 sets) and the final one
    (16,526 B, 57 sets) differ, as in the issue."""
    steps, pixels = _terms()
    base = TermFit((steps, pixels), 1000.0, (461.8, 322.8), 0.0, 29, ())
    final = attrs.evolve(base, residual=16526.0, tried=57)
    work = TermFit((pixels,), 4.5e8, (3.1e6,), 0.5, 23, ())
    switch = Switched(
        "cfg",
        False,
        12,
        "the same",
        "[steps, height * width] x (if cfg then 2 else 1)",
        "the same terms, exactly",
        (),
    )
    samples = tuple(Sample.at({**DEFAULT, "steps": k + 1}, 0.0) for k in range(16))
    return StageProposal(
        StagePlan("DecodingStage", (Use("vae.decode"),), False),
        IterationFit(num(1), ()),
        (),
        final,
        samples,
        ("steps", "height", "width"),
        (),
        False,
        TimeChoice((pixels,), TimeSource.WORK, work, 7, TimeCheck(True, 0, 0.0, 0.0, 0.0)),
        (),
        switches=(switch,),
        base_memory=base,
    )


def _comments() -> str:
    body = stage_body(_decoding(), DEFAULT)
    return "\n".join(line_text(line) for line in body)


def test_a_stage_comment_is_golden():
    assert _comments() == GOLDEN, _comments()


def test_the_comment_numbers_are_the_json_numbers():
    """Largest residual, sets tried, each coefficient and its part, parsed back from the comment,
    against the report's `stages[].memory` and `stages[].time.work`."""
    text = _comments()
    json = _stage(_decoding(), DEFAULT)
    memory, work = json["memory"], json["time"]["work"]  # type: ignore[index]
    found = re.search(r"largest residual (\d+) B, (\d+) sets tried", text)
    assert found is not None
    assert int(found.group(1)) == round(memory["largest_residual"])  # type: ignore[index]
    assert int(found.group(2)) == memory["sets_tried"]  # type: ignore[index]
    for quantity, unit, what in ((memory, "B", "memory"), (work, "work", "work")):
        (line,) = [t for t in text.splitlines() if t.startswith(f"# {what} at the default")]
        parts_text = line.split("): ", 1)[1].split("; ")
        shown = [
            re.fullmatch(rf"(?:constant (\S+) {unit}|(\S+) {unit} x (.+)) \((\S+)%\)", t)
            for t in parts_text
        ]
        parts = quantity["at_default"]  # type: ignore[index]
        assert all(shown), parts_text
        found = [(m[3] or "constant", m[1] or m[2], m[4]) for m in shown if m]
        assert [term for term, _, _ in found] == [p["term"] for p in parts]
        for (_, coefficient, fraction), part in zip(found, parts, strict=True):
            assert float(coefficient) == float(f"{part['coefficient']:.6g}")
            assert float(fraction) == round(100 * part["fraction"], 1)
    assert re.search(r"23 sets tried, largest residual 0.5 work", text)
    assert work["sets_tried"] == 23 and work["largest_residual"] == 0.5  # type: ignore[index]


def test_the_draft_file_carries_the_parts_at_the_default_workload():
    draft = draft_text(SKELETON, [_decoding()], "")
    assert (
        "# memory at the default workload (steps=50,height=512,width=512): 461.8 B x steps" in draft
    )


def test_a_conditional_term_is_parenthesized_and_a_negative_trace_reads_zero():
    """`2048 B x if cfg then 2 else 1` read as if the `x` were part of the condition; a
    negative constant that rounds to nothing read `(-0.0%)`."""
    from calibration.infer.shares import CONSTANT, Share, share_text

    parts = (
        Share("if cfg then 2 else 1", 2048.0, 4096.0, 0.9999),
        Share("height * (if cfg then 2 else 1)", 2.0, 8.0, 0.0021),
        Share(CONSTANT, -3.5, -3.5, -0.00001),
    )
    assert share_text(parts, "B") == (
        "2048 B x (if cfg then 2 else 1) (100.0%); "
        "2 B x height * (if cfg then 2 else 1) (0.2%); constant -3.5 B (0.0%)"
    )
    assert share_text((Share(CONSTANT, -9.0, -9.0, -0.25),), "B") == "constant -9 B (-25.0%)"
