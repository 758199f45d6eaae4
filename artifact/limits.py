"""Every resource limit the compiler and the loader share, defined once (docs/artifact.md "Limits").

The compiler (`dslc.limits`) imports these, so a program that checks always builds and loads.
"""

from __future__ import annotations

__all__ = [
    "MAX_BYTES",
    "MAX_CALLS",
    "MAX_CALL_WORK",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_LOAD_WORK",
    "MAX_MEASURE_TERMS",
    "MAX_MEMBERS",
    "MAX_MEMORY_TERMS",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_PIPELINES",
    "MAX_POW_EXPONENT",
    "MAX_STAGES",
    "MAX_STAGE_USES",
    "MAX_TEXT_LENGTH",
    "MAX_VALUE_BITS",
    "UNBOUNDED_BITS",
]

MAX_BYTES = 16 * 1024 * 1024  # an artifact file
MAX_PIPELINES = 1000  # pipelines in one artifact (one compilation)
MAX_STAGES = 64  # stages of one pipeline, inherited ones included
MAX_MEMBERS = 512  # params + lets + stages of one pipeline, inherited ones included
MAX_NAME_LENGTH = 64  # characters of a pipeline, param, let or stage name
MAX_TEXT_LENGTH = 4096  # characters of a string in the artifact (a contract's text, a path)
MAX_NODES = 200_000  # expression nodes of one artifact (formulas/ compiles to about 1,300)
MAX_DEPTH = 200  # nesting of one expression tree in the artifact
MAX_INT_DIGITS = 4300  # decimal digits of one integer (Python's own int-to-str guard)
MAX_POW_EXPONENT = 64  # the constant exponent of `**`
MAX_MEASURE_TERMS = 16  # terms of one stage's `memory ~ [t1, ...]`, and of its `time ~ [t1, ...]`
MAX_MEMORY_TERMS = MAX_MEASURE_TERMS  # the name before time took terms too
MAX_STAGE_USES = 16  # component uses of one stage
MAX_CALLS = 512  # `call` arguments of one pipeline
# A param ranging up to `inf` is bounded only by the largest int a request may pass: 4,300 digits.
UNBOUNDED_BITS: int = (10**MAX_INT_DIGITS).bit_length()
MAX_VALUE_BITS = 1 << 17  # bit length any value may reach over the declared param ranges
MAX_CALL_WORK = 1 << 22  # word operations one evaluation may take (artifact/cost.py)
MAX_LOAD_WORK = 1 << 23  # word operations of evaluating every formula of an artifact once
