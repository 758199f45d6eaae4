"""One small exception hierarchy for the runtime, so a serving worker can catch exactly what it
means.
"""

from __future__ import annotations

from collections.abc import Iterable

from artifact.spelling import passed_value

__all__ = [
    "ArtifactError",
    "ArtifactLimitError",
    "EvaluationError",
    "FormulaError",
    "InadmissibleError",
    "ParamError",
    "ParamTypeError",
    "UnknownParamError",
    "UnknownPipelineError",
    "UnknownStageError",
    "closest",
    "did_you_mean",
    "one_of",
]


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """Return the closest known name, so messages can suggest a fix for a typo."""
    import difflib  # only on the error path: keeps `import runtime` light

    matches = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def _hint(name: str, known: Iterable[str]) -> str:
    """Render the did-you-mean suffix of an unknown-name message (empty when nothing is close)."""
    best = did_you_mean(name, known)
    return f"; did you mean {best!r}?" if best is not None else ""


class FormulaError(Exception):
    """Base of every runtime error, so callers can catch the whole family at once."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        """Plain message (KeyError would otherwise repr-quote it)."""
        return self.message


class ArtifactError(FormulaError, ValueError):
    """The artifact is malformed or of an unknown version; `path` says where (e.g.
    `pipelines[0].name`), `location` the same as keys and indices from the document's root
    (`("pipelines", 0, "name")`; empty where the raiser gives no path), so a caller (the
    compiler's cost pass) can walk to the refused object without reading the text back.
    """

    def __init__(self, path: str, problem: str, location: tuple[str | int, ...] = ()) -> None:
        where = f"at {path}: " if path else ""
        super().__init__(f"invalid workload-formulas artifact: {where}{problem}")
        self.path = path
        self.problem = problem
        self.location = location


class ArtifactLimitError(ArtifactError):
    """The artifact exceeds a resource limit (artifact/limits.py): too many nodes or members, a
    name too long, or a value or an evaluation the static cost model bounds above its limit;
    `limit` names it (`"MAX_VALUE_BITS"`), so the compiler can say what to change."""

    def __init__(
        self, path: str, problem: str, location: tuple[str | int, ...] = (), *, limit: str = ""
    ) -> None:
        super().__init__(path, problem, location)
        self.limit = limit


class ParamError(FormulaError):
    """A request's params do not fit a pipeline; `pipeline` and `param` name what went wrong."""

    def __init__(self, message: str, pipeline: str, param: str | None) -> None:
        super().__init__(message)
        self.pipeline = pipeline
        self.param = param


class UnknownParamError(ParamError, KeyError):
    """A param name the pipeline does not declare (usually a typo: the message suggests the
    closest).
    """

    def __init__(self, pipeline: str, param: str, known: tuple[str, ...]) -> None:
        listed = ", ".join(known) if known else "none"
        super().__init__(
            f"pipeline {pipeline!r} has no param {param!r}{_hint(param, known)} (params: {listed})",
            pipeline,
            param,
        )
        self.known = known


class ParamTypeError(ParamError, TypeError):
    """A value of the wrong type (a bool for an int param, an int for a bool param, a float...)."""

    def __init__(
        self, pipeline: str, param: str, expected: str, value: object, message: str | None = None
    ) -> None:
        article = "an" if expected == "int" else "a"
        super().__init__(
            message
            or f"param {param!r} of pipeline {pipeline!r} takes {article} {expected}; "
            f"got {passed_value(value)} ({type(value).__name__})",
            pipeline,
            param,
        )
        self.expected = expected
        self.value = value


class InadmissibleError(ParamError, ValueError):
    """A point outside a param's range or violating a contract; `violations` lists each readably,
    and `suggestions` the nearest admissible values along each param at fault (`height = 48 or 64`)
    so that every command says how to fix the point, not only what is wrong."""

    def __init__(
        self,
        pipeline: str,
        violations: tuple[str, ...],
        params: tuple[str, ...],
        suggestions: tuple[str, ...] = (),
    ) -> None:
        nearest = f" (nearest admissible: {'; '.join(suggestions)})" if suggestions else ""
        super().__init__(
            f"point is not admissible for pipeline {pipeline!r}: "
            + "; ".join(violations)
            + nearest,
            pipeline,
            params[0] if params else None,
        )
        self.violations = violations
        self.params = params
        self.suggestions = suggestions


class ParamLimitError(ParamError, ValueError):
    """An int value beyond what the loader's cost model assumed for its param, which ranges to
    `inf`: `|value| < 2**limit_bits` (UNBOUNDED_BITS, about 4,300 digits), so evaluating a formula
    at it could take more work than the loader bounded. Raised by every method that takes params,
    `is_admissible` and `violations` included; `bits` is the value's bit length."""

    def __init__(self, pipeline: str, param: str, bits: int, limit: int) -> None:
        limit_bits = limit.bit_length() - 1
        super().__init__(
            f"param {param!r} of pipeline {pipeline!r} is an integer of {bits:,} bits; values "
            f"must stay below 2**{limit_bits:,} (about {round(limit_bits * 0.30103):,} "
            f"digits), the largest the cost model assumed for a param ranging to inf",
            pipeline,
            param,
        )
        self.bits = bits
        self.limit_bits = limit_bits


class UnknownStageError(FormulaError, KeyError):
    """A stage name the pipeline does not declare (the message suggests the closest)."""

    def __init__(self, pipeline: str, stage: str, known: tuple[str, ...]) -> None:
        super().__init__(
            f"pipeline {pipeline!r} has no stage {stage!r}{_hint(stage, known)} "
            f"(stages: {', '.join(known) if known else 'none'})"
        )
        self.pipeline = pipeline
        self.stage = stage
        self.known = known


def closest(name: str, known: Iterable[str], count: int = 3) -> tuple[str, ...]:
    """Up to `count` known names closest to `name`: those it begins, then difflib's (0.6 at
    least).
    """
    import difflib

    names = list(known)
    extending = [n for n in names if n.startswith(name) and n != name] if name else []
    similar = difflib.get_close_matches(name, names, n=count, cutoff=0.6)
    return tuple(dict.fromkeys(extending + similar))[:count]


def one_of(names: Iterable[str]) -> str:
    """`'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`."""
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


class UnknownPipelineError(FormulaError, KeyError):
    """`book[name]` for a pipeline the artifact lacks; a KeyError so Mapping semantics (`get`, `in`)
    hold.

    The message names the closest pipelines (`closest`) and how to list them all.
    """

    def __init__(self, name: str, known: tuple[str, ...]) -> None:
        self.name = name
        self.known = known
        self.closest = closest(name, known)
        hint = f"; did you mean {one_of(self.closest)}?" if self.closest else ""
        listing = (
            f" ({len(known)} pipelines: list(book) names them, `dslc list ARTIFACT` shows them)"
            if known
            else " (it has no pipelines)"
        )
        super().__init__(f"no pipeline {name!r} in the artifact{hint}{listing}")


class EvaluationError(FormulaError, ArithmeticError):
    """A formula cannot be evaluated at a point (division by zero, non-integer or negative
    result).
    """

    def __init__(self, message: str, pipeline: str, what: str) -> None:
        super().__init__(message)
        self.pipeline = pipeline
        self.what = what
