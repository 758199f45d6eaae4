"""`dslc infer`: measure a pipeline on a bounded ladder of cheap sizes and propose its formulas.

``infer`` is a loop of named steps (``run``): discovery (``layout``), the ladder planned per axis
(``ladder``) and measured through the same ``Session`` and recorder as `calibrate` (``measure``),
the steps that extend it (the steps ladder one level up, the work counted, time rechecks, the bool
params flipped), then the fit: the searches (``analyse``, ``search``, ``terms``) run every term set
through the one fitting core (``runtime.estimate.fit``) and keep the one of least leave-one-out
error; the `time ~` choice comes from the work counted op by op (``work``, ``time_terms``), the
switches' factors from ``switches``; ``draft`` writes the draft as `dslc.ast` expressions printed by
the compiler's formatter, ``report`` the JSON document. Deterministic
given the seed: the sizes are planned before anything runs, memory is exact on the CPU backend and
the time lines come from counted work, not a clock; ``axes`` makes a skeleton of `--axis` texts.
"""

from __future__ import annotations

from calibration.infer.run import Inference, infer

__all__ = ["Inference", "infer"]
