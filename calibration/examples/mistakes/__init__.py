"""Seeded formula mistakes: the measuring stick that calibration is never silent on a wrong formula.

Each ``model.Mistake`` (``catalogue.MISTAKES``) is one exact edit of a real formula file (a built-in
example's, or the test SD pipeline's), the shapes to calibrate it at (a target at least 4x the probe
in work) and what a correct verdict must name. ``run.calibrate_mistake`` runs the real calibration
on the edited formulas (compiled in memory); ``score.evaluate`` is pure: which stages miss at the
target (memory +-5 % raw, or a bound under the measured peak; time beyond +-5 % and its two sigma,
for mistakes about time, on the stages the mistake touches -- other stages' time misses are kept as
``noise``, not counted), which findings are actionable, and whether every missing stage is named by
one -- or the calibration refused to run with an error naming the bad fact. A request that failed
makes every stage miss. ``bench/mistakes.py`` runs the suite;
``tests/calibration/examples/test_mistakes.py`` asserts each mistake is caught.
"""
