"""What a seeded mistake is (the edit, the shapes, what a verdict must name) and what the suite
makes of its calibration (misses, findings, the outcome)."""

from __future__ import annotations

from types import MappingProxyType

from attrs import field, frozen

from artifact.point import Point


def _params(value: Point) -> Point:
    return MappingProxyType(dict(value))


@frozen
class Edit:
    """Replace ``old`` (which must occur exactly once in the file) by ``new``."""

    old: str
    new: str


@frozen
class Mistake:
    """One seeded mistake: where, the edit, the shapes and what a correct verdict names."""

    name: str
    kind: str  # the category: "wrong compression factor", "missing term", ...
    family: str  # a built-in example's name, or "custom_sd"
    formula_file: str  # relative to the repository root
    pipeline: str
    edits: tuple[Edit, ...]
    warmup: Point = field(converter=_params, hash=False)
    probe: Point = field(converter=_params, hash=False)
    target: Point = field(converter=_params, hash=False)
    stages: tuple[str, ...]  # the stages a correct verdict names
    direction: str | None  # the param (or probe axis) the finding should name, where one applies
    why: str
    quantities: tuple[str, ...] = ("memory",)  # what the mistake gets wrong
    refusal: str | None = None  # a refusal must name this (a fact checked before any run)
    repeat: int = 1  # rounds: more where time is judged (its spread shrinks with repeats)
    slow: bool = False


@frozen
class Miss:
    """One stage's phase (or time) off at the target."""

    stage: str
    quantity: str  # "memory" or "time"
    label: str
    predicted: float | None
    bound: float | None
    measured: float | None
    why: str  # "raw +6.7 %", "bound under the measured peak", "not measured", "request failed"


@frozen
class Named:
    """One finding as the suite sees it."""

    kind: str
    stage: str
    quantity: str
    direction: str | None
    actionable: bool


@frozen
class Outcome:
    """What the calibration said about one mistake, and whether that catches it."""

    mistake: str
    family: str
    misses: tuple[Miss, ...]
    findings: tuple[Named, ...]
    refused: str | None  # the CalibrationError's message, when it refused to run
    errors: tuple[str, ...]  # failed requests
    facts: tuple[str, ...] = ()  # a refusal names one of these to catch the mistake
    noise: tuple[Miss, ...] = ()  # time misses of stages the mistake leaves alone: not counted
    direction: str | None = None  # the param a correct finding names
    unjudged: str | None = None  # why this run's time noise cannot judge a time mistake

    @property
    def names_direction(self) -> bool:
        """A refusal, no direction to name, or an actionable finding that names it."""
        if self.refused is not None or self.direction is None:
            return True
        return any(f.actionable and self.direction in (f.direction or "") for f in self.findings)

    @property
    def missing(self) -> tuple[str, ...]:
        """The stages that miss, in order."""
        return tuple(dict.fromkeys(m.stage for m in self.misses))

    @property
    def named(self) -> tuple[str, ...]:
        """The stages some actionable finding names."""
        return tuple(dict.fromkeys(f.stage for f in self.findings if f.actionable))

    @property
    def harmless(self) -> bool:
        """Nothing misses and nothing failed: the mistake did not matter at these shapes."""
        return self.refused is None and not self.misses

    @property
    def caught(self) -> bool:
        """Refused naming the bad fact, or every missing stage named by an actionable finding."""
        if self.refused is not None:
            return any(fact in self.refused for fact in self.facts)
        return all(stage in self.named for stage in self.missing)
