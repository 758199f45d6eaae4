"""Every resource limit the compiler, the loader and calibration share, defined once
(docs/artifact.md "Limits").

The compiler (`dslc.limits`) imports these, so a program that checks always builds and loads.
"""

from __future__ import annotations

__all__ = [
    "MAX_BYTES",
    "MAX_CALLS",
    "MAX_CALL_WORK",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_LADDER_POINTS",
    "MAX_LOAD_WORK",
    "MAX_MARGIN",
    "MAX_MEASURE_TERMS",
    "MAX_MEMBERS",
    "MAX_MEMORY_TERMS",
    "MAX_NAME_LENGTH",
    "MAX_NODES",
    "MAX_PIPELINES",
    "MAX_PLAN_CANDIDATES",
    "MAX_PLAN_COMPONENTS",
    "MAX_PLAN_GROUPS",
    "MAX_PLAN_LAYERS",
    "MAX_PLAN_PAIRS",
    "MAX_PLAN_PHASES",
    "MAX_PLAN_TARGETS",
    "MAX_POW_EXPONENT",
    "MAX_PROBE_GROUP",
    "MAX_REPEAT",
    "MAX_REQUEST_SECONDS",
    "MAX_SEARCH_NODES",
    "MAX_SEARCH_WORK",
    "MAX_SEED",
    "MAX_STAGES",
    "MAX_STAGE_USES",
    "MAX_TEXT_LENGTH",
    "MAX_THREADS",
    "MAX_TIME_TOLERANCE",
    "MAX_VALUE_BITS",
    "MIN_SEED",
    "UNBOUNDED_BITS",
]

MAX_BYTES = 16 * 1024 * 1024  # an artifact file
MAX_PIPELINES = 1000  # pipelines in one artifact (one compilation)
MAX_STAGES = 64  # stages of one pipeline, inherited ones included
MAX_MEMBERS = 512  # params + lets + stages of one pipeline, inherited ones included
MAX_NAME_LENGTH = 64  # characters of a pipeline, param, let or stage name
MAX_TEXT_LENGTH = 4096  # characters of a string in the artifact (a contract's text, a path)
MAX_NODES = 100_000  # expression nodes of one artifact (formulas/ compiles to about 1,400)
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

# --- calibration (`dslc calibrate`, the warmup) and planning (`dslc plan`, `calibration.plan`) ---
# Every count their inputs drive is bounded here before anything is built (docs/artifact.md
# "Limits"); the compiler refuses a source whose facts exceed them (a probe group too large).
MAX_PROBE_GROUP = 8  # params of one `probe` group (and params the warmup and probe differ in)
MAX_LADDER_POINTS = 2048  # points of the time-probe ladder weighed (the nearest kept)
MAX_PLAN_COMPONENTS = 256  # components of one plan (a pipeline has under 10)
MAX_PLAN_LAYERS = 4096  # layers of one component (a 64-block transformer has 64)
MAX_PLAN_CANDIDATES = 16_384  # placements over all components (layers + 2 each)
MAX_PLAN_TARGETS = 4096  # targets of one plan (the bench plans 1,000 shapes at once)
MAX_PLAN_PHASES = 65_536  # phases over all targets
MAX_PLAN_PAIRS = 1 << 20  # (phase, component) and (target, layer) pairs the planner weighs
MAX_PLAN_GROUPS = 1024  # distinct active sets (one constraint each) of one plan
MAX_SEARCH_NODES = 2_000_000  # nodes the exact search visits
MAX_SEARCH_WORK = 1 << 24  # work units of the search (a unit: about one Python operation)

# --- run options (`dslc calibrate`, `dslc plan`, `dslc infer`): refused at option parsing ---
MAX_REPEAT = 20  # rounds of the probe and the re-warm (3 by default; medians settle within 5)
MAX_THREADS = 1024  # torch CPU threads; also at most the machine's cores (os.cpu_count())
MIN_SEED = -(1 << 63)  # the seed: torch.manual_seed's inclusive range
MAX_SEED = (1 << 64) - 1
MAX_MARGIN = 100.0  # the fixed margin (a finite float in [1, MAX_MARGIN]; 1.2 by default)
MAX_TIME_TOLERANCE = 1.0  # the share of a request's time (a finite float in (0, 1])
MAX_REQUEST_SECONDS = 3600.0  # wall-clock seconds one `dslc infer` request may take (--timeout)
