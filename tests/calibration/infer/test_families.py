"""`dslc infer` end to end on every built-in example family and the test-only SD 1.5 pipeline.

For each family, a draft is inferred from a skeleton (params, `call` and `probe height, width`
only: tests/calibration/data/skeletons/) on the CPU; then:

- it passes `dslc check` and is formatted as `dslc fmt` writes it;
- its stages are the hand-written file's, with the same iteration formula at every admissible
  point of a grid;
- `calibrate --verify` with the draft meets the memory goals at the example's target (>= 4x the
  probe): every phase's raw estimate within 5 % of the measured peak, no bound under it.

SD 1.5: the draft has the PNDM scheduler's extra UNet call and its history term; two runs (one
through the CLI) give the same draft. Each family's draft is inferred once (``_draft``); every
family's determinism is checked cheaply (``test_every_family_measures_and_proposes_the_same``).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("diffusers")

from calibration.calibrate.pipeline import calibrate_pipeline
from calibration.calibrate.run import load_pipeline
from calibration.core.shapes import Shapes
from calibration.examples import EXAMPLES
from calibration.infer import infer

ROOT = Path(__file__).resolve().parents[3]
SKELETONS = ROOT / "tests/calibration/data/skeletons"
SD_BASE = {"steps": 2, "height": 32, "width": 32}
SD_SHAPES = Shapes(
    SD_BASE,
    {"steps": 2, "height": 32, "width": 32},
    {"steps": 8, "height": 64, "width": 64},
)

#: family -> (skeleton, hand-written file, pipeline).
FAMILIES = {
    "wan": ("wan.wf", "formulas/wan.wf", "wan2_1_t2v_1_3b"),
    "flux": ("flux.wf", "formulas/flux.wf", "flux1_dev"),
    "sdxl": ("sdxl.wf", "formulas/sdxl.wf", "sdxl_base"),
    "cogvideox": ("cogvideox.wf", "formulas/cogvideox.wf", "cogvideox_2b"),
    "pixart": ("pixart_sigma.wf", "formulas/pixart_sigma.wf", "pixart_sigma_1024"),
    "custom_sd": ("custom_sd.wf", "tests/calibration/data/custom_sd.wf", "custom_sd"),
}


def _source(family: str):
    """(factory, call_kwargs, base, its Shapes)."""
    if family == "custom_sd":
        module = importlib.import_module("tests.calibration.custom_pipeline")
        return module.build, module.call_kwargs, SD_BASE, SD_SHAPES
    example = EXAMPLES[family]
    return example.build, example.call_kwargs, example.warmup, example.shapes


@functools.cache
def _draft(family: str):
    factory, call_kwargs, base, _ = _source(family)
    skeleton = (SKELETONS / FAMILIES[family][0]).read_text()
    return infer(factory, skeleton, base=base, call_kwargs=call_kwargs, seed=0)


def _hand(family: str):
    _, path, name = FAMILIES[family]
    return load_pipeline(ROOT / path, name)


def _drafted(family: str, tmp_path: Path):
    path = tmp_path / f"{family}.wf"
    path.write_text(_draft(family).draft)
    return path, load_pipeline(path, FAMILIES[family][2])


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_draft_passes_check_and_is_formatted(family):
    from dslc.compiler import compile_text
    from dslc.fmt import format_source
    from dslc.source import SourceFile

    text = _draft(family).draft
    result = compile_text(text, f"{family}-draft.wf")
    assert result.ok, [str(d) for d in result.diagnostics]
    assert format_source(SourceFile("draft", text)) == text
    assert "# iterations:" in text and "# memory:" in text  # every proposal with its evidence


def _grid(pipeline):
    values = {
        "steps": range(1, 13),
        "frames": range(1, 42),
        "height": (16, 32, 48, 64, 96, 128, 256),
        "width": (16, 32, 64, 128),
        "cfg": (True, False),
    }
    names = list(pipeline.params)
    for combo in itertools.product(*(values[n] for n in names)):
        yield dict(zip(names, combo, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_iteration_formulas_equal_the_hand_written_ones_on_a_grid(family, tmp_path):
    hand = _hand(family)
    _, draft = _drafted(family, tmp_path)
    assert list(draft.stages) == list(hand.stages)
    assert draft.stepped_stages == hand.stepped_stages
    assert {s: [(u.component, u.method) for u in us] for s, us in draft.uses.items()} == {
        s: [(u.component, u.method) for u in us] for s, us in hand.uses.items()
    }
    checked = 0
    for point in _grid(hand):
        if not (hand.is_admissible(**point) and draft.is_admissible(**point)):
            continue
        for stage in hand.stages:
            assert draft.iterations(stage, **point) == hand.iterations(stage, **point), (
                stage,
                point,
            )
        checked += 1
    assert checked > 100


def _peaks_hold(cal) -> list[str]:
    """Every phase (and the request) against the goals: raw within 5 %, bound never under."""
    misses = []
    for c in [*cal.phases(), cal.request_peak()]:
        if c.measured is None or c.predicted is None:
            continue
        if c.bound is None or c.bound < c.measured:
            misses.append(f"{c.label}: bound {c.bound} under {c.measured}")
        if abs(c.predicted - c.measured) > 0.05 * c.measured:
            misses.append(f"{c.label}: raw {c.predicted:.0f} vs {c.measured} measured")
    return misses


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_calibrate_verify_with_the_draft_meets_the_memory_goals(family, tmp_path):
    factory, call_kwargs, _, shapes = _source(family)
    _, draft = _drafted(family, tmp_path)
    cal = calibrate_pipeline(
        factory,
        draft,
        shapes,
        call_kwargs=call_kwargs,
        verify=True,
        repeat=1,
        time_tolerance=None,
    )
    assert cal.work_ratio >= 4, cal.work_ratio
    assert cal.measured is not None and cal.measured.ok
    assert not cal.errors
    assert _peaks_hold(cal) == []


@pytest.mark.slow
def test_a_draft_calibrated_at_cfg_true_predicts_cfg_false(tmp_path):
    """The switch's factor carries a probe at one value to a target at the other: without it the
    UNet's memory at cfg=false came out 11 % over (a batch of one, predicted as two)."""
    factory, call_kwargs, _, _ = _source("sdxl")
    _, draft = _drafted("sdxl", tmp_path)
    memory = draft.memory_terms
    at = {"steps": 2, "height": 128, "width": 128}
    assert memory("DenoisingStage", **at, cfg=True) != memory("DenoisingStage", **at, cfg=False)
    shapes = Shapes(
        {"steps": 2, "height": 64, "width": 64, "cfg": True},
        {**at, "cfg": True},
        {"steps": 8, "height": 256, "width": 256, "cfg": False},
    )
    cal = calibrate_pipeline(
        factory, draft, shapes, call_kwargs=call_kwargs, verify=True, repeat=1, time_tolerance=None
    )
    assert cal.measured is not None and cal.measured.ok and not cal.errors
    assert _peaks_hold(cal) == []


@pytest.mark.slow
def test_the_sd15_draft_has_the_extra_unet_call_and_the_history_term(tmp_path):
    inferred = _draft("custom_sd")
    denoise = next(p for p in inferred.proposals if p.plan.name == "DenoisingStage")
    assert denoise.iterations.formula == "if steps > 1 then steps + 1 else 1"
    terms = [m.text for m in denoise.memory.terms]
    history = [t for t in terms if t.startswith("max(min(steps") and "height * width" in t]
    assert history, terms
    at = terms.index(history[0])
    _, draft = _drafted("custom_sd", tmp_path)

    def history(steps):  # the draft's history term per pixel
        point = {"steps": steps, "height": 64, "width": 64, "cfg": True}
        return Fraction(draft.memory_terms("DenoisingStage", **point)[at]) / (64 * 64)

    def held(steps):  # the latents the hand-written file says PNDM holds
        return max(min(steps - 1, 4), 2)

    # the same history as the hand-written term, up to a constant the other term absorbs
    assert [history(s) - history(2) for s in range(2, 12)] == [
        held(s) - held(2) for s in range(2, 12)
    ]


@pytest.mark.slow
def test_two_runs_give_the_same_draft_and_the_report_lists_every_size(tmp_path):
    from calibration.cli.infer import infer as command

    out = tmp_path / "draft.wf"
    result = CliRunner().invoke(
        command,
        [
            "--pipeline",
            "tests.calibration.custom_pipeline:build",
            "--params",
            str(SKELETONS / "custom_sd.wf"),
            "--base",
            "steps=2,height=32,width=32",
            "-o",
            str(out),
            "--plot",
            str(tmp_path / "infer.svg"),
            "--json",
            "--strict",
        ],
    )
    # the UNet's work at these tiny sizes is no polynomial: its time is a guess, an open proposal
    assert result.exit_code == 5, result.output
    assert "1 open proposal to review: DenoisingStage: time guessed" in result.stderr
    body = [line for line in out.read_text().splitlines() if not line.startswith("# Drafted")]
    first = _draft("custom_sd").draft.splitlines()
    assert body == first, [(a, b) for a, b in zip(body, first, strict=False) if a != b]
    tutorial = (ROOT / "docs/tutorial.md").read_text()
    shown = tutorial[tutorial.index("<!-- file: sd_draft.wf -->") :]
    shown = shown[shown.index("    probe steps") : shown.index("```", 10)]
    proposed = "\n".join(body)
    assert shown.strip() in proposed, "docs/tutorial.md section 8 shows another draft"
    report = json.loads(result.stdout)
    assert report["open"] == ["DenoisingStage: time guessed from the memory's terms"]
    distinct = {tuple(s["params"].items()) for s in report["sizes"]}  # a time recheck: twice
    assert distinct == {tuple(m.record.params.items()) for m in _draft("custom_sd").measured}
    assert all(s["ok"] for s in report["sizes"])
    counted = report["work_counted"]  # the same numbers as the other run's
    assert counted and all(w["ok"] and w["params"]["steps"] == 2 for w in counted)
    again = _draft("custom_sd").work
    assert [dict(r.params) for r in again] == [w["params"] for w in counted]
    assert [{p.name: p.duration_s for p in r.phases if p.kind == "stage"} for r in again] == [
        w["stages"] for w in counted
    ]
    stages = {s["name"]: s for s in report["stages"]}
    figure = (tmp_path / "infer.svg").read_text()  # --plot: one panel a stage
    assert figure.count('<g id="axes_') == len(stages) and "wrote" in result.stderr
    tried = stages["DenoisingStage"]["iterations"]["tried"]
    assert [t["verdict"] for t in tried][-1] == "chosen" and len(tried) > 2
    assert stages["DenoisingStage"]["memory"]["sets_tried"] > 1
    for stage in stages.values():  # the measured times' check, which the draft leaves out
        time = stage["time"]
        assert time["from"] in ("work", "approximate", "memory")
        assert time["work"]["sizes"] > 0 and time["work"]["sets_tried"] >= 1
        measured = time["measured"]
        assert measured["base_spread"] >= 0 and "spread" in measured["tolerance"]
        assert measured["checked"] == (measured["largest_residual_over_tolerance"] <= 1)
        assert measured["checked"] == (measured["off_the_tolerance"] == [])
        assert min(measured["slopes"], default=0) >= 0


def test_a_skeleton_with_stages_or_a_bad_base_is_a_usage_error(tmp_path):
    from calibration.cli.infer import infer as command

    bad = tmp_path / "bad.wf"
    bad.write_text((ROOT / "formulas/flux.wf").read_text())
    result = CliRunner().invoke(command, ["--example", "flux", "--params", str(bad)])
    assert result.exit_code == 1 and "exactly one pipeline" in result.output
    staged = tmp_path / "staged.wf"
    staged.write_text(
        (SKELETONS / "flux.wf").read_text().rstrip().rstrip("}")
        + "    stage S uses transformer {}\n}\n"
    )
    result = CliRunner().invoke(command, ["--example", "flux", "--params", str(staged)])
    assert result.exit_code == 1 and "declares stages already" in result.output
    result = CliRunner().invoke(
        command,
        ["--example", "flux", "--params", str(SKELETONS / "flux.wf"), "--base", "height=33"],
    )
    assert result.exit_code == 1 and "not admissible" in result.output
    many = tmp_path / "many.wf"
    params = "    param steps: int = 4 in [1, 50]\n" + "".join(  # the example's warmup names it
        f"    param {p}: int = 64 in [16, 128]\n" for p in ("height", "width")
    )
    params += "".join(f"    param p{k}: int = 1 in [1, 9]\n" for k in range(4))  # 7 in all
    many.write_text(f"pipeline many {{\n{params}}}\n")
    result = CliRunner().invoke(command, ["--example", "flux", "--params", str(many)])
    assert result.exit_code == 1 and "at most 6" in result.output
    result = CliRunner().invoke(
        command, ["--example", "flux", "--params", str(SKELETONS / "flux.wf"), "--base", "frames=9"]
    )
    assert result.exit_code == 1 and "not declare" in result.output
    result = CliRunner().invoke(command, ["--params", str(SKELETONS / "flux.wf")])
    assert result.exit_code == 2 and "--example" in result.output


def _exact(record) -> list[tuple[object, ...]]:
    """What a record says that the draft's iterations and memory are made of (no seconds)."""
    phases = [
        (p.kind, p.name, p.stage, p.count, p.peak_allocated - record.baseline_allocated)
        for p in record.phases
    ]
    steps = [(s.stage, s.measured) for s in record.stage_iterations]
    return [record.ok, *phases, *steps]


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_measures_and_proposes_the_same(family):
    """The draft is the same in two runs, per family, for a fraction of a second run's cost.

    A draft is a pure function of the measurements (``proposals_from``), so two runs give the
    same draft when (1) a second measurement gives the same records and (2) the proposal step
    gives the same draft from the same records. (1): a fresh pipeline from the factory, the same
    seed and formulas, re-measures three of the ladder's sizes (the base, the largest fitted, the
    first held-out) and every stage's phases, counts and peaks above the baseline equal the first
    run's, record for record (seconds excluded: the draft writes none). (2): the proposals are
    made again from the first run's records, in the reverse order, and give the same draft text;
    the time lines come from the counted work, which a second count gives exactly, at the same
    three sizes and at one with the bool param flipped (memory too). Inferring each family twice
    would double a four-minute test.
    """
    from calibration.infer.draft import draft_text
    from calibration.infer.measure import Runner, load, measuring_formulas
    from calibration.infer.run import proposals_from

    inferred = _draft(family)
    factory, call_kwargs, _, _ = _source(family)
    skeleton = (SKELETONS / FAMILIES[family][0]).read_text()
    fitted = [m for m in inferred.measured if not m.held_out]
    held = [m for m in inferred.measured if m.held_out]
    again = [fitted[0], fitted[-1], held[0]]

    def runner(counting: bool) -> Runner:
        fresh = Runner(
            factory,
            measuring_formulas(skeleton, inferred.pipeline, inferred.plans),
            seed=0,
            call_kwargs=call_kwargs,
            progress=None,
            total=4,
            counting=counting,
        )
        fresh.warm(inferred.base)
        return fresh

    measurer = runner(counting=False)
    for m in again:
        record = measurer.measure(m.record.params, "again")
        assert _exact(record) == _exact(m.record), dict(m.record.params)
    counter = runner(counting=True)
    counted = [inferred.work[0], inferred.work[len(inferred.work) // 2], inferred.work[-1]]
    counted.append(inferred.switched[-1].record)  # a bool param flipped: memory and work
    for r in counted:
        record = counter.measure(r.params, "counted again")
        assert [(p.name, p.duration_s) for p in record.phases] == [
            (p.name, p.duration_s) for p in r.phases
        ], dict(r.params)
        assert _exact(record) == _exact(r), dict(r.params)
    sk = load(skeleton, inferred.pipeline, "skeleton")
    reordered = proposals_from(
        sk,
        inferred.plans,
        inferred.measured[::-1],
        inferred.base,
        inferred.repeats[::-1],
        inferred.work[::-1],
        inferred.switched[::-1],
    )
    assert draft_text(skeleton, reordered, "") == inferred.draft
