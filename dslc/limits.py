"""Resource bounds: untrusted formula files must never make the compiler blow up."""

MAX_FILE_BYTES = 1 << 20  # 1 MiB per source file
MAX_TOKENS = 16_384  # per source file: keeps the worst-case parse well under a second
MAX_NESTING = 64  # brackets and parentheses
MAX_DEPTH = 100  # expression tree depth after parsing
MAX_LITERAL_DIGITS = 30  # digits in one numeric literal
MAX_EXPONENT = 64  # `**` exponent
MAX_LIST_ITEMS = 1024
MAX_MEASURE_TERMS = 16  # terms of one memory measure (each adds a slope the estimators fit)
MAX_PIPELINES = 1000  # per compilation
MAX_STAGES = 64  # per pipeline
MAX_MEMBERS = 512  # params + lets + stages per pipeline
MAX_CONSTANT_BITS = 4096  # bit length of a constant built with `**`
MAX_DEGREE = 1024  # polynomial degree bound of a formula with lets inlined
MAX_ERRORS = 50  # diagnostics reported per run
PROVER_SECONDS = 0.5  # sympy budget per formula
MAX_STAGE_USES = 16  # components (with methods) in one stage's `uses` list; the loader's bound too
MAX_CALLS = 512  # `call` arguments of one pipeline after inheritance; the loader's bound too
