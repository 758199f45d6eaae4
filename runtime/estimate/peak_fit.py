"""Rule 2 of ``runtime/estimate/peaks.py`` as a modeler's policy: the fit of one constraint's
measured peaks, margin aside, made once per (stage, policy, samples, target) by the modeler.

The policy (``FitRule.PEAK``) says which sizes (the largest peak of each, the sizes nearest the
target that add a direction), the sign rule (a negative slope worth at most ``NEGLIGIBLE`` of the
fit at the target is left out, a larger one gives no fit) and the floor of the constant (the active
components' weight bytes, or the fewer weights their peaks held on the device: ``held_floor``). The
margin is applied by the reader (``PeakModel.at``), so the estimate
and the fixed-margin bounds read one fit. The fit reads the key's samples alone (the one
``Sample`` type; ``peak_samples`` converts the estimate's ``MeasuredPoint`` at its edge).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction

from attrs import evolve, frozen

from artifact.point import PointKey
from runtime.estimate.fit.exact import basic_solution, estimable, independent_rows, row
from runtime.estimate.fit.model import FitKey, Modeler, Policy, Sample
from runtime.estimate.fit.regimes import split_fit
from runtime.estimate.fit.samples import Layout
from runtime.estimate.points import ceil_bytes, show_measure, show_terms
from runtime.estimate.results import LinearFit, Measure, MeasuredPoint, PlaneFit
from runtime.kinds import FitRule, Quantity
from runtime.levels import activations_at
from runtime.record import Phase

Terms = tuple[Measure, ...]

#: A term whose negative slope moves the fit at the target by at most this share is noise (left out
#: of the fit); a larger one means the sizes disagree with the formula: scale instead (rule 3).
NEGLIGIBLE = Fraction(1, 100)


@frozen
class PeakModel:
    """One constraint's fit, margin aside: the line (one term) or plane and its reason."""

    fit: LinearFit | PlaneFit
    reason: str

    def at(self, target: Terms, margin: Fraction = Fraction(1)) -> int:
        """The fit at the target's terms, its linear part padded by ``margin``, in whole bytes."""
        if isinstance(self.fit, LinearFit):
            return ceil_bytes(self.fit.at(target[0], margin))
        return ceil_bytes(self.fit.at(target, margin))


@frozen
class PeakPlace:
    """Where a constraint's fit is read from: the modeler, the phase ``(kind, name)`` (None: the
    request's own peaks) and its component layout, and the target's params (the key's)."""

    modeler: Modeler
    target: PointKey
    phase: tuple[str, str] | None = None
    layout: Layout | None = None
    rule: FitRule = FitRule.PEAK  # or ``FitRule.LEVEL``: a weights level's series
    slack: float = 0.0  # the residual the memory backend alone can produce (``FitRule.LEVEL``)

    def fit(
        self, stage: str, points: Sequence[MeasuredPoint], target: Terms, floor: int
    ) -> PeakModel | str:
        """The modeler's fit of ``points`` (made once per key), or why there is none."""
        level = self.rule == FitRule.LEVEL
        policy = Policy(
            Quantity.MEMORY,
            self.phase,
            self.layout,
            self.slack if level else 0.0,
            rule=self.rule,
            floor=floor,
        )
        key = FitKey(stage, policy, peak_samples(points), self.target)
        over = key.policy.slack if level else None
        return self.modeler.fit(key, lambda k: fit_peak(k.samples, target, k.policy.floor, over))


def peak_samples(points: Sequence[MeasuredPoint]) -> tuple[Sample, ...]:
    """What a peak fit reads, one sample a measured size: its terms and its absolute peak with
    the growth to the target's last iteration (the estimate's edge: ``MeasuredPoint``)."""
    return tuple(
        Sample((), (p.adjusted_peak_bytes,), tuple(Fraction(t) for t in p.terms)) for p in points
    )


@frozen
class _Size:
    """A peak sample as rule 2 reads it: its terms exact (whole ones as ``int``, as the formulas
    give them), their sum, and its peak."""

    terms: Terms
    measure: Measure
    adjusted_peak_bytes: int

    @staticmethod
    def of(sample: Sample) -> _Size:
        terms = tuple(_whole(t) for t in sample.terms)
        return _Size(terms, _whole(sum(sample.terms, Fraction(0))), int(sample.runs[0]))


def _whole(value: Fraction) -> Measure:
    return int(value) if value.denominator == 1 else value


def held_floor(floor: int, held: Iterable[int | None]) -> int:
    """The floor of a fit's constant: the active components' weights, or fewer where every size
    measured the weights on the device at its peak -- under offload only the groups onloaded then
    are there, never the whole component, and a constant floored at it predicts the weights the
    placement never holds (as activations)."""
    seen = list(held)
    if not seen or any(h is None for h in seen):
        return floor
    return min(floor, *(h for h in seen if h is not None))


def held_alike(phases: Sequence[Phase], terms: Sequence[Terms], target: Terms) -> list[int]:
    """Each size's phase peak (``phases``, at ``terms``) as if it held the weights that the size
    nearest the target held at its peak: under offload each size peaks with other weights on the
    device, and a fit or a check over the peaks as measured reads the weights' difference as
    activations. Where every size measured its activations' own peak (``Phase.activations_bytes``:
    a small size peaks while a large group is onloaded, not where its activations do), that plus
    the nearest's weights; else, where every size measured its weights, the peak less its own
    weights plus the nearest's; else the peaks as measured. With the weights fixed (no offload),
    the peaks as measured: activations plus the same weights."""
    peaks = [p.peak_allocated for p in phases]
    held = [p.weights_bytes for p in phases]
    if not phases or any(h is None for h in held):
        return peaks
    nearest = max(range(len(phases)), key=lambda i: relative_size(terms[i], target))
    kept = held[nearest] or 0
    own = [p.activations_bytes for p in phases]
    if all(a is not None for a in own):
        return [(a or 0) + kept for a in own]
    return [peak + kept - (h or 0) for peak, h in zip(peaks, held)]


def by_level(
    phases: Sequence[Phase], terms: Sequence[Terms], target: Terms
) -> list[tuple[int, list[int]]]:
    """Each size's phase peak at each weights level of the size nearest the target (a level's
    weights and one peak a size, ``Phase.weight_levels``): that level's weights plus the
    activations' own peak while the size held them (or held more: ``levels.activations_at``, never
    under). The phase's peak at the target is the highest level's fit: under offload its peak may
    hold the largest group with few activations while its activations peak under a smaller group.
    Empty where a size lacks levels or the nearest saw one level (``held_alike`` is then exact)."""
    levels = [p.weight_levels for p in phases]
    if not phases or any(lv is None for lv in levels):
        return []
    nearest = levels[max(range(len(phases)), key=lambda i: relative_size(terms[i], target))]
    if nearest is None or len(nearest) < 2:  # one level: nothing to separate
        return []
    series: list[tuple[int, list[int]]] = []
    for weights, _ in nearest:
        # a size that never held as many weights: its activations' highest (never under)
        own = [activations_at(lv or (), weights) for lv in levels]
        top = [max((a for _, a in lv or ()), default=0) for lv in levels]
        series.append((weights, [weights + (t if a is None else a) for a, t in zip(own, top)]))
    return series


def relative_size(terms: Terms, target: Terms) -> tuple[Fraction, Fraction]:
    """How large a size is next to the target: the sum of its terms' ratios to the target's."""
    ratios = sum((Fraction(t) / Fraction(g) for t, g in zip(terms, target) if g), Fraction(0))
    return ratios, Fraction(sum(terms))


def fit_peak(
    samples: Sequence[Sample], target: Terms, floor: int, level: float | None = None
) -> PeakModel | str:
    """Rule 2: the fit of ``samples`` (``peak_samples``) through the sizes nearest the target
    that determine it (no margin), or why there is none (the text the fallback's reason ends
    with); for a weights level (``level``: the backend's slack), ``_level_fit``."""
    largest: dict[Terms, _Size] = {}
    for p in (_Size.of(s) for s in samples):
        if p.terms not in largest or p.adjusted_peak_bytes > largest[p.terms].adjusted_peak_bytes:
            largest[p.terms] = p
    ordered = sorted(largest.values(), key=lambda p: relative_size(p.terms, target), reverse=True)
    if level is not None:
        return _level_fit(ordered, target, floor, level)
    return _peak_fit(ordered, target, floor)


def _level_fit(
    ordered: Sequence[_Size], target: Terms, floor: int, slack: float
) -> PeakModel | str:
    """A weights level's fit: its activations need not follow the formula's terms over all sizes
    (the phase's peak does; a level is one part of it) -- under offload a small size's activations
    under a large group carry a fixed part the larger sizes' lack, and the plane through the
    nearest sizes that span every term reaches down to it for a direction, a slope negative. Where
    the plain fit gives none, the plane on which the sizes nearest the target lie exactly, the
    smaller ones on a constant of their own (``fit.regimes.split_fit``: the least far
    extrapolation its checks allow, within the backend's ``slack``), never under the level's
    largest measured peak at the target."""
    plain = _peak_fit(ordered, target, floor)
    if not isinstance(plain, str):
        return plain
    values = [Fraction(p.adjusted_peak_bytes) for p in ordered]
    split = split_fit([p.terms for p in ordered], values, target, slack)
    if len(target) < 2 or split is None:
        return plain
    constant = max(split.constant, Fraction(min(floor, ordered[0].adjusted_peak_bytes)))
    chosen = [ordered[i] for i in split.chosen if i < split.near]
    model = _plane_model(constant, split.slopes, chosen, target, (), len(chosen) - 1)
    if model.at(target) < max(values[: split.near]):
        return plain
    far = " and ".join(show_terms(p.terms) for p in reversed(ordered[split.near :]))
    reason = f"{model.reason} (the smaller sizes {far} on a constant of their own)"
    return evolve(model, reason=reason)


def _peak_fit(ordered: Sequence[_Size], target: Terms, floor: int) -> PeakModel | str:
    """The fit through the sizes in ``ordered`` (nearest the target first) that determine it, or
    why there is none."""
    keep = list(range(len(target)))
    left_out: list[int] = []
    negative_slope = ""
    while True:
        solved = _plane(ordered, target, keep)
        if isinstance(solved, str):  # the terms left do not determine the target: say why not
            return negative_slope or solved
        constant, slopes, chosen = solved
        negative = [i for i in keep if slopes[i] < 0]
        if not negative:
            break
        sizes = " and ".join(show_terms(p.terms) for p in reversed(chosen))
        negative_slope = f"; the fit on measures {sizes} has a negative slope (noise)"
        value = constant + sum((s * t for s, t in zip(slopes, target)), Fraction(0))
        if len(negative) == len(keep) or any(
            abs(slopes[i] * target[i]) > NEGLIGIBLE * abs(value) for i in negative
        ):
            return negative_slope
        # a term whose negative slope is worth a few bytes at the target does not grow this
        # phase (the bytes of a scheduler's step arrays decided its sign): leave it out and fit
        # the others, rather than scale a small size by its largest term ratio
        left_out += negative
        keep = [i for i in keep if i not in negative]
    constant = max(constant, Fraction(min(floor, chosen[0].adjusted_peak_bytes)))
    if len(target) == 1:
        return _line(constant, slopes[0], chosen, target[0])
    return _plane_model(constant, slopes, chosen, target, left_out, len(keep))


def _line(
    constant: Fraction, slope: Fraction, chosen: Sequence[_Size], target: Measure
) -> PeakModel:
    """The line through the two sizes nearest the target (one memory term)."""
    small, large = chosen[1].measure, chosen[0].measure
    reason = (
        f"fit on measures {show_measure(small)} and {show_measure(large)}: "
        f"{float(constant):.0f} B + {float(slope):.6g} B x measure, "
        f"at target {show_measure(target)}"
    )
    return PeakModel(LinearFit(constant, slope, (small, large)), reason)


def _plane_model(
    constant: Fraction,
    slopes: Sequence[Fraction],
    chosen: Sequence[_Size],
    target: Terms,
    left_out: Sequence[int],
    kept: int,
) -> PeakModel:
    """The plane through the sizes nearest the target (several memory terms)."""
    sizes = " and ".join(show_terms(p.terms) for p in reversed(chosen))
    plane = PlaneFit(constant, tuple(slopes), tuple(p.terms for p in reversed(chosen)))
    linear = " + ".join(f"{float(s):.6g} B x term {i + 1}" for i, s in enumerate(slopes))
    reason = (
        f"fit on measures {sizes}: {float(constant):.0f} B + {linear}, at target "
        f"{show_terms(target)}"
    )
    if left_out:
        shown = ", ".join(f"term {i + 1}" for i in sorted(left_out))
        reason += f" ({shown} fitted a negative slope, noise: left out, slope 0)"
    if len(chosen) < kept + 1:
        reason += " (terms that do not vary among them ride in the constant, as at the target)"
    return PeakModel(plane, reason)


def _plane(
    ordered: Sequence[_Size], target: Terms, keep: Sequence[int]
) -> tuple[Fraction, list[Fraction], list[_Size]] | str:
    """The plane over the terms in ``keep`` (the others at slope 0) through the sizes nearest the
    target that add a direction: (constant, a slope per term, those sizes), or why there is none
    (a reason to append to the fallback's)."""

    def project(terms: Terms) -> Terms:
        return tuple(terms[i] for i in keep)

    indices = independent_rows([row(project(p.terms)) for p in ordered])
    chosen = [ordered[i] for i in indices]
    if len(chosen) < 2:
        return ""
    rows = [row(project(p.terms)) for p in chosen]
    if not estimable(rows, row(project(target))):
        sizes = " and ".join(show_terms(p.terms) for p in reversed(chosen))
        return (
            f"; the measured sizes {sizes} do not determine the memory terms at the target "
            "(measure a size that varies the others)"
        )
    constant, *kept = basic_solution(rows, [Fraction(p.adjusted_peak_bytes) for p in chosen])
    slopes = [Fraction(0)] * len(target)
    for i, slope in zip(keep, kept):
        slopes[i] = slope
    return constant, slopes, chosen
