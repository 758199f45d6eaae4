"""Mutation fuzzing of `.wf` sources and compiled artifacts (the module moved to
`dslc.fuzzing.artifacts`; the next commit splits it by job)."""

from dslc.fuzzing.artifacts import (
    ARTIFACT_MUTATORS,
    CASE_SECONDS,
    CODE_NAMES,
    SOURCE_MUTATORS,
    CaseClock,
    Failure,
    check_artifact,
    check_source,
    mutate_artifact,
    mutate_source,
    real_artifact,
    real_sources,
    tokenize,
)

__all__ = [
    "ARTIFACT_MUTATORS",
    "CASE_SECONDS",
    "CODE_NAMES",
    "SOURCE_MUTATORS",
    "CaseClock",
    "Failure",
    "check_artifact",
    "check_source",
    "mutate_artifact",
    "mutate_source",
    "real_artifact",
    "real_sources",
    "tokenize",
]
