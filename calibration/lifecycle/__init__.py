"""A serving worker's residency lifecycle: measure, plan, apply, validate, roll back, serve.

``run.run_lifecycle`` is the one entry point (the CLI's ``dslc plan --validate`` and a worker call
it); ``model`` holds the modes and the report, ``validate`` compares a measured request (memory and
time) with the plan, ``agree`` gives every rank the most cautious bounds and plans every rank
(``exchange`` carries a rank's planning inputs as text), ``faults`` injects failures at the memory
backend and at accelerate's hooks, ``render`` shows the report; `dslc plan --validate` is
``calibration.cli.validate``.
See docs/planning.md, "The lifecycle".
"""
