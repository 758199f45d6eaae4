"""A serving worker's residency lifecycle: measure, plan, apply, validate, roll back, serve.

``run.run_lifecycle`` is the one entry point (the CLI's ``dslc plan --validate`` and a worker call
it); ``model`` holds the modes and the report, ``validate`` compares a measured request with the
plan, ``agree`` keeps ranks on one placement, ``faults`` injects failures at the memory backend,
``render`` shows the report. See docs/planning.md, "The lifecycle".
"""
