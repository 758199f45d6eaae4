"""Resource bounds: untrusted formula files must never make the compiler blow up.

The limits an artifact must also meet are defined once, in `artifact.limits`, and imported here,
so that a program that checks always builds and loads.
"""

from artifact.limits import (
    MAX_CALL_WORK,
    MAX_CALLS,
    MAX_LOAD_WORK,
    MAX_MEMBERS,
    MAX_NAME_LENGTH,
    MAX_NODES,
    MAX_PIPELINES,
    MAX_PROBE_GROUP,
    MAX_STAGE_USES,
    MAX_STAGES,
    MAX_VALUE_BITS,
    UNBOUNDED_BITS,
)
from artifact.limits import MAX_MEMORY_TERMS as MAX_MEASURE_TERMS
from artifact.limits import MAX_POW_EXPONENT as MAX_EXPONENT

__all__ = [
    "MAX_CALLS",
    "MAX_CALL_WORK",
    "MAX_CONSTANT_BITS",
    "MAX_DEGREE",
    "MAX_DEPTH",
    "MAX_ERRORS",
    "MAX_EXPONENT",
    "MAX_FILE_BYTES",
    "MAX_LIST_ITEMS",
    "MAX_LITERAL_DIGITS",
    "MAX_LOAD_WORK",
    "MAX_MEASURE_TERMS",
    "MAX_MEMBERS",
    "MAX_NAME_LENGTH",
    "MAX_NESTING",
    "MAX_NODES",
    "MAX_PIPELINES",
    "MAX_PROBE_GROUP",
    "MAX_STAGES",
    "MAX_STAGE_USES",
    "MAX_TOKENS",
    "MAX_VALUE_BITS",
    "PROVER_SECONDS",
    "UNBOUNDED_BITS",
]

MAX_FILE_BYTES = 1 << 20  # 1 MiB per source file
MAX_TOKENS = 16_384  # per source file, newlines included: keeps the worst parse under a second
MAX_NESTING = 64  # brackets and parentheses
MAX_DEPTH = 100  # expression tree depth after parsing
MAX_LITERAL_DIGITS = 30  # digits in one numeric literal
MAX_LIST_ITEMS = 1024
MAX_CONSTANT_BITS = 4096  # bit length of a constant built with `**`
MAX_DEGREE = 1024  # polynomial degree bound of a formula with lets inlined
MAX_ERRORS = 50  # diagnostics reported per run
PROVER_SECONDS = 0.5  # sympy budget per formula
