"""Hypothesis settings profiles for the suite, chosen by ``HYPOTHESIS_PROFILE`` (default ``ci``).

- ``ci``: no deadline (a shared machine's clock is no measure of a test's work: tests bound work,
  sizes and steps instead), no example database (a run depends on nothing left by an earlier one),
  and a failure prints the blob that reproduces it (``@reproduce_failure``);
- ``dev``: as ``ci`` but with the local database, so a failure found once is replayed first.

No profile suppresses a health check: a test that needs one suppressed names it, with the reason.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", deadline=None, database=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
