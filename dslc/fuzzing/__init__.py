"""Mutation fuzzing of `.wf` sources and compiled artifacts (shared by bench/fuzz.py and
tests/test_fuzz.py), one module per job: `sources` mutates `.wf` text, `artifacts` mutates the
artifact document, `harness` runs a case through the compiler or the runtime's loader.

Two targets, one contract each:

- a mutated source through `dslc.compiler.compile_text` gives a `CompileResult` (clean, or with
  diagnostics), never any other exception;
- a mutated artifact through `runtime.load_formulas` loads, or raises a `runtime.FormulaError`.

Either must finish within `harness.CASE_SECONDS` of CPU time (`harness.CaseClock`: the work a case
does, the same on a quiet or a loaded machine; wall time only guards against a hang). Every mutator
takes a `random.Random` so a case is reproducible from its seed:
`sources.mutate_source(random.Random(seed), text)`.
"""
