"""`dslc infer`'s searches and ladder on synthetic data: exact, smallest first, bounded.

No pipeline runs here (infer/test_families.py runs real ones): the measured values are computed
from known formulas, so what the search must find is known.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.infer.analyse import fit_memory
from calibration.infer.ladder import MAX_SIZES, plan, steps_param
from calibration.infer.layout import StagePlan, Use, stage_node
from calibration.infer.measure import load, printed, skeleton_tree, with_stages
from calibration.infer.search import MAX_SETS, fit_iterations, fit_terms
from calibration.infer.terms import features, iteration_forms, monomials
from runtime.estimate.fit.model import Sample

SKELETONS = Path(__file__).resolve().parents[1] / "data" / "skeletons"
PARAMS = ("steps", "frames", "height", "width")
CONTRACTS = {"steps": (), "frames": ("frames % 4 == 1",), "height": (), "width": ()}


def _table():
    return {p: features(p, CONTRACTS[p], steps=p == "steps") for p in PARAMS}


def _grid():
    """A ladder like infer's: every param alone, then jointly."""
    base = {"steps": 2, "frames": 9, "height": 32, "width": 32}
    points = [dict(base)]
    points += [{**base, "steps": s} for s in range(1, 8)]
    points += [{**base, "frames": f} for f in (1, 5, 13, 17)]
    points += [{**base, "height": h} for h in (64, 96)]
    points += [{**base, "width": w} for w in (64, 96)]
    for f in (9, 13):
        for h in (32, 64):
            for w in (32, 64):
                for s in (2, 4, 6):
                    points.append({"steps": s, "frames": f, "height": h, "width": w})
    unique = []
    for p in points:
        if p not in unique:
            unique.append(p)
    return base, unique


def test_the_pndm_count_is_the_repeating_form_and_steps_is_rejected():
    forms = iteration_forms(["steps", "height"], [])
    counts = [({"steps": s, "height": 32}, s + 1 if s > 1 else 1, s == 7) for s in range(1, 8)]
    fit = fit_iterations(forms, counts)
    assert fit.formula == "if steps > 1 then steps + 1 else 1"
    assert fit.tried[0].verdict.startswith("rejected")
    assert any(t.text == "steps + 1" and "rejected" in t.verdict for t in fit.tried)


def test_a_held_out_size_rejects_a_form_the_fitted_sizes_allow():
    forms = iteration_forms(["steps"], [])
    # steps + 1 on every fitted size; the held-out size says otherwise, and so no form fits
    counts = [({"steps": s}, s + 1, False) for s in (2, 3)] + [({"steps": 4}, 6, True)]
    fit = fit_iterations(forms, counts)
    assert any(t.text == "steps + 1" and t.verdict.startswith("held-out") for t in fit.tried)
    assert fit.formula is None


def test_latent_frames_is_found_where_frames_would_need_two_terms():
    base, grid = _grid()
    table = _table()

    def value(p):  # tokens: latent frames x pixels; frames x pixels would need a second term
        latent = (p["frames"] - 1) // 4 + 1
        return 1000 + 5 * latent * p["height"] * p["width"]

    samples = [Sample.at(p, float(value(p))) for p in grid]
    fit, moving, regimes, approximate = fit_memory(samples, base, PARAMS, table)
    assert regimes == () and not approximate
    assert set(moving) == {"frames", "height", "width"}
    assert [m.text for m in fit.terms] == ["latent_frames * height * width"]
    assert fit.terms[0].features[0].text == "(frames - 1) // 4 + 1"
    assert fit.residual < 1e-6


def test_a_history_term_saturating_in_steps_is_found():
    base, grid = _grid()

    def value(p):
        pixels = p["height"] * p["width"]
        return 7 * pixels + 2 * max(min(p["steps"] - 1, 4), 2) * pixels

    samples = [Sample.at(p, float(value(p))) for p in grid]
    fit, moving, _, _approximate = fit_memory(samples, base, PARAMS, _table())
    assert "steps" in moving
    texts = [m.text for m in fit.terms]
    assert texts[0] == "height * width" and len(texts) == 2
    assert "max(min(" in texts[1] and texts[1].endswith("* height * width")
    for s in samples:  # whatever clamp it chose is the same function on the ladder
        predicted = fit.constant + sum(
            c * m.at(s.point) for c, m in zip(fit.slopes, fit.terms, strict=True)
        )
        assert abs(predicted - s.value) < 1e-6


def test_the_smallest_sizes_off_the_fit_become_a_probe_minimum():
    base, grid = _grid()

    def value(p):
        pixels = p["height"] * p["width"]
        latent = (p["frames"] - 1) // 4 + 1
        bump = 777 * pixels if p["frames"] < 9 else 0  # a cache that is still filling
        return 9 * latent * pixels - bump

    samples = [Sample.at(p, float(value(p))) for p in grid]
    fit, _, regimes, _approximate = fit_memory(samples, base, PARAMS, _table())
    assert [(r.param, r.minimum) for r in regimes] == [("frames", 9)]
    assert all(p["frames"] < 9 for p in regimes[0].dropped)
    assert [m.text for m in fit.terms] == ["latent_frames * height * width"]


@settings(max_examples=25, deadline=None)
@given(
    picks=st.lists(st.integers(0, 13), min_size=0, max_size=2, unique=True),
    slopes=st.lists(st.integers(1, 50), min_size=2, max_size=2),
    constant=st.integers(0, 10_000),
)
def test_any_combination_of_plain_monomials_is_reproduced_by_no_more_terms(picks, slopes, constant):
    _base, grid = _grid()
    plain = monomials({p: features(p, (), steps=False)[:1] for p in PARAMS})
    chosen = [plain[i] for i in picks]
    samples = [
        Sample.at(p, float(constant + sum(s * m.at(p) for s, m in zip(slopes, chosen))))
        for p in grid
    ]
    fit = fit_terms([plain], samples)
    assert fit.terms is not None and len(fit.terms) <= len(chosen)
    assert fit.residual < 1e-6
    assert all(s >= -1e-9 for s in fit.slopes)
    assert fit.tried <= MAX_SETS


def test_the_search_stops_at_its_limit_of_sets():
    _base, grid = _grid()
    table = _table()
    everything = monomials(table)
    # no combination of three terms gives a random-looking value: the search gives up, bounded
    samples = [Sample.at(p, float((i * 7919) % 104729)) for i, p in enumerate(grid)]
    fit = fit_terms([everything], samples)
    assert fit.terms is None
    assert fit.tried <= MAX_SETS


def test_the_ladder_is_admissible_bounded_and_deterministic():
    text = (SKELETONS / "wan.wf").read_text()
    sk = load(text, "wan2_1_t2v_1_3b", "wan.wf")
    base = {"steps": 2, "frames": 17, "height": 32, "width": 32, "cfg": True}
    sizes = plan(sk, base)
    assert sizes == plan(sk, base)
    assert len(sizes) <= MAX_SIZES
    assert all(sk.is_admissible(**s.point) for s in sizes)
    assert sizes[0].point == base
    assert any(s.held_out for s in sizes) and not all(s.held_out for s in sizes)
    assert steps_param(sk) == "steps"
    assert {s.point["frames"] for s in sizes} >= {1, 5, 9, 13, 17, 21, 25}


def test_stages_go_before_the_closing_brace_and_the_rest_is_kept():
    text = (SKELETONS / "flux.wf").read_text()
    stage = stage_node(StagePlan("S", (Use("transformer"),), False))
    out = printed(with_stages(skeleton_tree(text), [stage]))
    assert out.index("stage S") > out.index("probe height, width")
    assert out.rstrip().endswith("}")
    assert text.splitlines()[0] in out
