"""Bool params (switches) in `dslc infer`: each flipped from the base's value at the ladder's
sizes, and each stage's iterations, memory and time checked there.

A switch such as `cfg` doubles a batch (memory and work of the denoiser) or a pass (its work): a
draft fitted at one value alone would predict the other value's memory as its own. At the
flipped sizes, the terms found at the base's value are kept and the factor `(if P then 2 else 1)`
(or `(if P then 1 else 2)`) is put on the fewest of them (or a term split into a part it doubles
and a part it leaves, or a part only one value has: ``SHAPES``), the factor alone being one more
term, until the constant + non-negative combination gives both values' sizes (exactly for memory
and work, as the rest of infer); an iteration count that differs gets `if P then A else B`. Where no
such set fits, the draft keeps the base's terms and says so (and the command prints a note):
never a silent guess. Pure: records in, values out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import product

from attrs import evolve, frozen

from artifact.point import Point
from artifact.spelling import point_text
from calibration.infer.analyse import (
    APPROXIMATE,
    Measured,
    StageProposal,
    Switched,
    count_of,
    feature_table,
    in_regimes,
    memory_of,
    seconds_of,
)
from calibration.infer.search import (
    MEMORY_SLACK,
    IterationFit,
    TermFit,
    fit_iterations,
    fit_terms,
)
from calibration.infer.terms import Feature, IterationForm, Monomial, iteration_forms, name, num
from calibration.infer.time_terms import WORK_APPROXIMATE, WORK_SLACK, TimeChoice, TimeSource
from dslc import ast
from runtime.estimate.fit import point_key
from runtime.estimate.fit.model import Sample

#: The most bool params flipped (the others stay at the base's value): each costs a pass over
#: the ladder's sizes at the base's steps and the steps ladder.
MAX_SWITCHES = 2
#: The factor a switch may put on a term: a batch or a pass doubled.
FACTOR = 2


def factor(param: str, on: bool) -> Feature:
    """`(if P then 2 else 1)` (``on``) or `(if P then 1 else 2)`: a term doubled by the switch."""
    big, small = (FACTOR, 1) if on else (1, FACTOR)
    return Feature(param, _if(param, big, small), _factor_fn(big, small), 0)


def only(param: str, on: bool) -> Feature:
    """`(if P then 1 else 0)` (``on``) or `(if P then 0 else 1)`: a part only one value has."""
    yes, no = (1, 0) if on else (0, 1)
    return Feature(param, _if(param, yes, no), _factor_fn(yes, no), 0)


def _if(param: str, yes: int, no: int) -> ast.Expr:
    return ast.IfElse(name(param), num(yes), num(no))


def _factor_fn(big: int, small: int) -> Callable[[int], int]:
    return lambda v: big if v else small


#: How a term may change, the fewest changes first: kept; doubled by the switch (either way);
#: split into a part it doubles and a part it leaves (a batch's activations beside a scheduler's
#: latents); split into a part both values have and one only one of them has (the guidance's own
#: temporaries: no shared factor, so a probe at each value is needed to pin both).
SHAPES = ("kept", "up", "down", "split up", "split down", "only on", "only off")
#: The shapes that keep one coefficient a term for both values: a probe at either value
#: calibrates the other, so these are tried first, within 2 % too, before any split.
SHARED = SHAPES[:3]


def factored(
    terms: Sequence[Monomial], param: str, shapes: Sequence[str] = SHAPES
) -> list[tuple[Monomial, ...]]:
    """Every way to change ``terms`` (one of ``shapes`` a term), the factor alone one more term;
    the fewest changes first, then in the terms' order: at most 7^n x 3 sets."""
    extra = {
        "up": factor(param, True),
        "down": factor(param, False),
        "on": only(param, True),
        "off": only(param, False),
    }

    def on(m: Monomial, f: Feature) -> Monomial:
        return Monomial((*m.features, f))

    out: list[tuple[int, int, tuple[Monomial, ...]]] = []
    for k, picks in enumerate(product(shapes, repeat=len(terms))):
        chosen: list[Monomial] = []
        for m, shape in zip(terms, picks, strict=True):
            f = extra[shape.split()[-1]] if shape != "kept" else None
            if f is None:
                chosen.append(m)
            elif " " in shape:
                chosen += [m, on(m, f)]
            else:
                chosen.append(on(m, f))
        changes = sum(0 if shape == "kept" else 2 if " " in shape else 1 for shape in picks)
        out.append((changes, 3 * k, tuple(chosen)))
        for j, alone in enumerate((extra["up"], extra["down"])):
            out.append((changes + 1, 3 * k + j + 1, (*chosen, Monomial((alone,)))))
    return [chosen for _, _, chosen in sorted(out, key=lambda t: (t[0], t[1]))]


@frozen
class SwitchFit:
    """The factored terms found (None: none), how close, and the evidence for the comment."""

    fit: TermFit | None
    approximate: bool
    tried: int
    miss: str  # where the base's own terms miss most (when none fits exactly)


def fit_switched(
    terms: Sequence[Monomial], samples: Sequence[Sample], param: str, loose: float
) -> SwitchFit:
    """The first set of shared factors (``SHARED``) that gives every sample (both values) within
    its tolerance, else within ``loose`` (flagged); only then the splits, exact, else within
    ``loose``: a split needs a probe at each value, a shared factor one at either. The sets
    tried."""
    tried = 0
    miss = ""
    relaxed = [evolve(x, tolerance=max(x.tolerance, loose * abs(x.value))) for x in samples]
    seen: set[tuple[tuple[str, ...], bool]] = set()  # a shared set is not tried twice
    phases = ((SHARED, False), (SHARED, True), (SHAPES, False), (SHAPES, True))
    for shapes, approximate in phases:
        chosen_samples = relaxed if approximate else samples
        for chosen in factored(terms, param, shapes):
            key = (tuple(m.text for m in chosen), approximate)
            if key in seen:
                continue
            seen.add(key)
            fit = fit_terms([list(chosen)], chosen_samples, len(chosen), least=len(chosen))
            tried += 1
            if fit.terms is not None:
                return SwitchFit(evolve(fit, tried=tried), approximate, tried, miss)
            if not miss:
                miss = fit.rejected[0] if fit.rejected else "not determined by the sizes"
    return SwitchFit(None, False, tried, miss)


def _form(formula: ast.Expr, forms: Sequence[IterationForm]) -> IterationForm | None:
    if isinstance(formula, ast.Num):
        value = int(formula.value)
        return IterationForm(formula, lambda p: value)
    return next((f for f in forms if f.expr == formula), None)


def _switch_iterations(
    p: StageProposal,
    ok: Sequence[Measured],
    param: str,
    value: bool,
    forms: Sequence[IterationForm],
) -> tuple[IterationFit, str, bool]:
    """The iteration formula at both values: the same, or `if P then A else B`; whether it is
    left unexplained (for review)."""
    counts = [
        (dict(m.record.params), c, m.held_out)
        for m in ok
        if (c := count_of(m.record, p.plan)) is not None
    ]
    iterations = p.iterations
    form = None if iterations.expr is None else _form(iterations.expr, forms)
    if form is None and iterations.expr is not None:  # another switch's `if` already
        return iterations, "not checked: the formula holds another switch's `if`", True
    if form is None or all(form.fn(pt) == c for pt, c, _ in counts):
        return iterations, "the same", False
    other = fit_iterations(forms, counts)
    if other.expr is None or iterations.expr is None:
        return iterations, "differ, and no formula of the grammar gives them", True
    pair = (other.expr, iterations.expr)
    on, off = pair if value else pair[::-1]
    where = f"{param}={'true' if value else 'false'}"
    said = f"{other.formula} at {where}"
    return evolve(iterations, expr=ast.IfElse(name(param), on, off)), said, False


def switch_stage(
    p: StageProposal,
    flipped: Sequence[Measured],
    param: str,
    value: bool,
    forms: Sequence[IterationForm],
) -> StageProposal:
    """``p`` (fitted at the base's value) checked at ``flipped`` sizes (the switch at ``value``,
    their work counted: the records' seconds are work) and extended where they differ."""
    ok = [m for m in flipped if m.record.ok]
    where = f"{param}={'true' if value else 'false'}"
    if not ok:
        failed = next((m.record.error for m in flipped if m.record.error is not None), None)
        why = f"the runs at {where} failed" + (f" ({failed.message})" if failed else "")
        every = ("iterations", "memory", "time")
        note = Switched(param, value, 0, why, why, why, every, failed=len(flipped))
        return evolve(p, switches=(*p.switches, note))
    iterations, said_iterations, missed = _switch_iterations(p, ok, param, value, forms)
    review: list[str] = ["iterations"] if missed else []
    memory, approximate, said_memory, missed = _switch_memory(p, ok, param)
    review += ["memory"] if missed else []
    time, said_time, missed = _switch_time(p, ok, param, value)
    review += ["time"] if missed else []
    n = len({point_text(m.record.params) for m in ok})
    note = Switched(
        param,
        value,
        n,
        said_iterations,
        said_memory,
        said_time,
        tuple(review),
        _unchanged(p, ok, param, value),
        len(flipped) - len(ok),
    )
    return evolve(
        p,
        iterations=iterations,
        memory=memory,
        approximate=approximate,
        time=time,
        switches=(*p.switches, note),
        base_memory=p.base_memory or p.memory,
    )


def _said(found: SwitchFit, before: Sequence[Monomial], loose: float) -> str:
    terms = found.fit.terms if found.fit is not None and found.fit.terms else ()
    kept = {m.text for m in before}
    added = [m.text for m in terms if m.text not in kept]
    how = f"within {loose:.0%} (APPROXIMATE: none exactly)" if found.approximate else "exactly"
    if not added:
        return f"the same terms, {how}"
    sets = "1 set" if found.tried == 1 else f"{found.tried} sets"
    return f"{', '.join(added)} fit both values {how} ({sets} tried)"


def switch_all(
    proposals: Sequence[StageProposal],
    flips: Mapping[str, Sequence[Measured]],
    base: Point,
    ints: Sequence[str],
    contracts: Mapping[str, Sequence[str]],
    steps: str | None,
    lows: Mapping[str, int | None] | None = None,
) -> list[StageProposal]:
    """Every stage checked at every flipped switch, in the switches' order; what each showed is
    the proposal's ``switches``."""
    table = feature_table(contracts, ints, steps)
    lets = [f for p in ints for f in table[p] if f.let is not None]
    forms = iteration_forms(ints, lets, lows)
    out: list[StageProposal] = []
    for p in proposals:
        for param, measured in flips.items():
            p = switch_stage(p, measured, param, not bool(base[param]), forms)
        out.append(p)
    return out


def _switch_time(
    p: StageProposal, ok: Sequence[Measured], param: str, value: bool
) -> tuple[TimeChoice, str, bool]:
    """The time terms at both values of the switch, from the work counted at the base's sizes;
    a guess (no set gives the work) takes the factor when the work's growth doubles or halves."""
    loose = WORK_APPROXIMATE if p.time.source == TimeSource.APPROXIMATE else 0.0

    def within(v: float) -> float:
        return max(1.0, WORK_SLACK * abs(v), loose * abs(v))

    at = {point_key({**s.point, param: value}): s for s in p.work_samples}
    pairs = [
        (at[point_key(m.record.params)], v)
        for m in ok
        if point_key(m.record.params) in at
        and (v := seconds_of(m.record, p.plan.name, count_of(m.record, p.plan) or 1)) is not None
    ]
    if not pairs:
        return p.time, "no work counted at the flipped sizes", True
    if p.time.source == TimeSource.MEMORY:
        ratios = _growth_ratios(pairs)
        for ratio, f in ((1.0, None), (FACTOR, value), (1 / FACTOR, not value)):
            if all(abs(r / ratio - 1) <= WORK_APPROXIMATE for r in ratios):
                if f is None:
                    return p.time, "the memory's guess kept (the same work)", False
                terms = tuple(Monomial((*m.features, factor(param, f))) for m in p.time.terms)
                terms = terms or (Monomial((factor(param, f),)),)
                said = f"the guess x ({factor(param, f).text}): the work's growth doubles"
                return evolve(p.time, terms=terms), said, False
        said = f"the memory's guess kept; the work's growth changes by no factor of {FACTOR}"
        return p.time, said, True
    works = [evolve(s, tolerance=within(s.value)) for s in p.work_samples] + [
        Sample.at(s.point | {param: value}, v, s.held_out, within(v)) for s, v in pairs
    ]
    found = fit_switched(p.time.terms, works, param, WORK_APPROXIMATE)
    if found.fit is None:
        said = f"no factor of {FACTOR} on the terms gives the work within "
        return p.time, said + f"{WORK_APPROXIMATE:.0%} ({found.tried} sets; {found.miss})", True
    time = evolve(p.time, terms=found.fit.terms or ())  # the evidence stays the base's
    return time, _said(found, p.time.terms, WORK_APPROXIMATE), False


def _switch_memory(
    p: StageProposal, ok: Sequence[Measured], param: str
) -> tuple[TermFit, bool, str, bool]:
    """The memory terms at both values of the switch: exact as the CPU counts, else within
    ``APPROXIMATE`` (flagged); the base's terms kept, for review, when no factored set fits."""
    if p.memory.terms is None:
        return p.memory, p.approximate, "no terms to check", False
    loose = APPROXIMATE if p.approximate else 0.0

    def within(v: float) -> float:
        return max(MEMORY_SLACK, loose * abs(v))

    samples = [
        evolve(s, tolerance=within(s.value))
        for s in p.memory_samples
        if in_regimes(s.point, p.regimes)
    ] + [
        Sample.at(m.record.params, v, m.held_out, within(v))
        for m in ok
        if (v := memory_of(m.record, p.plan.name)) is not None
        and in_regimes(m.record.params, p.regimes)
    ]
    found = fit_switched(p.memory.terms, samples, param, APPROXIMATE)
    if found.fit is None:
        said = f"no factor of {FACTOR} on the terms fits within {APPROXIMATE:.0%} "
        return p.memory, p.approximate, said + f"({found.tried} sets; {found.miss})", True
    memory = evolve(found.fit, tried=p.memory.tried + found.tried, rejected=p.memory.rejected)
    said = _said(found, p.memory.terms, APPROXIMATE)
    return memory, p.approximate, said, False


def _growth_ratios(pairs: Sequence[tuple[Sample, float]]) -> list[float]:
    """Flipped over base: of each size's work above the smallest size's (what grows with the
    params: the weights read once a step are the same under both values), else of the work."""
    smallest, first_flipped = min(pairs, key=lambda pair: pair[0].value)
    first_base = smallest.value
    grown = [
        (v - first_flipped) / (s.value - first_base)
        for s, v in pairs
        if s.value - first_base > WORK_APPROXIMATE * first_base
    ]
    return grown or [v / s.value if s.value else 1.0 for s, v in pairs]


def _unchanged(p: StageProposal, ok: Sequence[Measured], param: str, value: bool) -> bool:
    """Whether every flipped size measured what the base's value did (memory, work and count): a
    switch the call does not turn on, or one this stage ignores."""
    memory = {point_key({**s.point, param: value}): s.value for s in p.memory_samples}
    work = {point_key({**s.point, param: value}): s.value for s in p.work_samples}
    counts = {point_key({**point, param: value}): c for point, c in p.counts}
    for m in ok:
        key = point_key(m.record.params)
        count = count_of(m.record, p.plan)
        if key in counts and count != counts[key]:
            return False
        if key in memory and memory_of(m.record, p.plan.name) != memory[key]:
            return False
        if key in work and seconds_of(m.record, p.plan.name, count or 1) != work[key]:
            return False
    return True
