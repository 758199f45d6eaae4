"""Seeded formula mistakes (calibration.examples.mistakes): each one's calibration must catch it.

A mistake is caught when every stage that misses at the target (memory +-5 % raw or a bound under
the measured peak; time beyond +-5 % and two sigma, for mistakes about time) is named by an
actionable finding, or the calibration refuses to run with an error naming the bad fact. Each
mistake should really miss (one that does not is skipped: harmless at its shapes) and the finding
must name the param the mistake gets wrong. The ones today's checks are silent on are strict
xfails. A mistake about time that this run's time noise swamps (a size's residual beyond its own
runs' spread, but no size off its fit on clean, replicated evidence: a loaded machine) is skipped,
never counted caught; one whose sizes show no miss at all is judged.
"""

from __future__ import annotations

import pytest

from calibration.examples.mistakes.catalogue import BY_NAME, MISTAKES
from calibration.examples.mistakes.run import compile_mistake, edited_text, run_mistake

#: Mistakes a calibration is silent on, and why (none since issue 18: each entry is a strict xfail).
SILENT: dict[str, str] = {}


def _param(name: str) -> object:
    marks = []
    if BY_NAME[name].slow:
        marks.append(pytest.mark.slow)
    if name in SILENT:
        marks.append(pytest.mark.xfail(strict=True, reason=f"issue 18: {SILENT[name]}"))
    return pytest.param(name, marks=marks, id=name)


def test_the_suite_covers_the_issues_kinds_over_three_families():
    kinds = {m.kind for m in MISTAKES}
    assert {
        "wrong compression factor",
        "missing CFG doubling",
        "missing term",
        "constant where the stage grows",
        "wrong iteration count",
        "wrong call argument",
        "stage mapped to the wrong component",
        "wrong probe minimum",
    } <= kinds
    assert len(MISTAKES) >= 10 and len({m.family for m in MISTAKES}) >= 3
    assert set(SILENT) <= set(BY_NAME)


@pytest.mark.parametrize("name", list(BY_NAME))
def test_every_edit_applies_once_and_compiles(name):
    mistake = BY_NAME[name]
    assert (
        edited_text(mistake) != (edited_text.__globals__["ROOT"] / mistake.formula_file).read_text()
    )
    assert set(mistake.stages) <= set(compile_mistake(mistake).stages)


@pytest.mark.parametrize("name", [_param(m.name) for m in MISTAKES])
def test_the_calibration_catches_the_mistake(name):
    mistake = BY_NAME[name]
    outcome, _ = run_mistake(mistake)
    shown = f"{mistake.why}: {outcome}"
    if (
        (outcome.harmless or not outcome.caught)
        and outcome.unjudged is not None
        and name not in SILENT
    ):
        pytest.skip(f"the machine's time noise swamps the evidence: {outcome.unjudged}")
    if outcome.harmless:
        # It did not matter at these shapes (its risk went into the bound), yet the calibration is
        # never silent about it: a finding names one of its stages and the param it gets wrong.
        assert any(
            f.stage in mistake.stages
            and (mistake.direction is None or mistake.direction in (f.direction or ""))
            for f in outcome.findings
        ), shown
        return
    assert outcome.caught, shown
    assert outcome.names_direction, shown
