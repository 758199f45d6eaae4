"""Run one fuzz case (a mutated source through the compiler, a mutated artifact through the
runtime's loader) and hold it to its contract (dslc.fuzzing's docstring) and its CPU time.
"""

from __future__ import annotations

import time

__all__ = ["CASE_SECONDS", "CaseClock", "Failure", "check_artifact", "check_source"]

CASE_SECONDS = 1.0  # a single case using more CPU time than this is a failure
HANG_FACTOR = 10.0  # a case idle this many times its CPU limit in wall time is hung (a FIFO read)


class CaseClock:
    """CPU and wall time of one case: the limit is on CPU time (this process, all its threads),
    so a loaded machine does not fail a case; wall time past ``HANG_FACTOR`` times it is a hang."""

    def __init__(self) -> None:
        self.cpu, self.wall = time.process_time(), time.perf_counter()

    def elapsed(self) -> tuple[float, float]:
        """CPU and wall seconds since the case started."""
        return time.process_time() - self.cpu, time.perf_counter() - self.wall

    def overrun(self, seconds: float | None) -> str | None:
        """What a case past its limit did, or None within it (no limit: None)."""
        cpu, wall = self.elapsed()
        if seconds is None:
            return None
        if cpu > seconds:
            return f"took {cpu:.2f} s of CPU time (limit {seconds} s)"
        if wall > seconds * HANG_FACTOR:
            return f"took {wall:.2f} s of wall time (hang limit {seconds * HANG_FACTOR:g} s)"
        return None


# --------------------------------------------------------------------------- outcomes


class Failure(Exception):
    """A case broke the contract: an unexpected exception, a wrong result type, or too slow."""

    def __init__(self, kind: str, mutation: str, problem: str, payload: object) -> None:
        super().__init__(f"{kind} [{mutation}]: {problem}")
        self.kind = kind
        self.mutation = mutation
        self.problem = problem
        self.payload = payload


def check_source(text: str, mutation: str = "?", seconds: float | None = CASE_SECONDS) -> float:
    """Compile `text`; return the seconds taken, or raise `Failure` (past `seconds` too)."""
    from dslc.compiler import CompileResult, compile_text
    from dslc.diagnostics import Diagnostic

    clock = CaseClock()
    try:
        result = compile_text(text, "fuzz.wf")
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise Failure("source", mutation, f"{type(exc).__name__}: {exc}"[:500], text) from exc
    if not isinstance(result, CompileResult) or not all(
        isinstance(d, Diagnostic) for d in result.diagnostics
    ):
        raise Failure("source", mutation, f"not a clean CompileResult: {result!r}"[:500], text)
    if not (result.ok or result.errors):
        raise Failure("source", mutation, "no program and no error diagnostic", text)
    if (overrun := clock.overrun(seconds)) is not None:
        raise Failure("source", mutation, overrun, text)
    return clock.elapsed()[0]


def check_artifact(
    payload: object, mutation: str = "?", seconds: float | None = CASE_SECONDS
) -> float:
    """Load `payload` (a mapping or JSON text) and evaluate every pipeline, memory and time terms
    too, at its default workload; return the seconds taken, or raise `Failure`. A `FormulaError`
    is a clean outcome.
    """
    from runtime import FormulaError, load_formulas

    clock = CaseClock()
    try:
        book = load_formulas(payload)  # type: ignore[arg-type]  # mutated on purpose
        for name in book:
            pipeline = book[name]
            pipeline.evaluate()
            for stage in pipeline.stages:  # a measure's terms have evaluators of their own
                pipeline.memory_terms(stage)
                pipeline.time_terms(stage)
    except FormulaError:
        pass
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise Failure("artifact", mutation, f"{type(exc).__name__}: {exc}"[:500], payload) from exc
    if (overrun := clock.overrun(seconds)) is not None:
        raise Failure("artifact", mutation, overrun, payload)
    return clock.elapsed()[0]
