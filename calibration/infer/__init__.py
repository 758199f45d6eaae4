"""`dslc infer`: measure a pipeline on a bounded ladder of cheap sizes and propose its formulas.

``infer`` runs discovery (``layout``), the ladder (``ladder``) through the same ``Session`` and
recorder as `calibrate` (``measure``), the exact searches (``analyse``, ``search``, ``terms``), the
`time ~` choice from the work counted op by op (``work``, ``time_terms``), the bool params flipped
(``switches``), and writes the draft (``draft``); ``report`` is the JSON document. Deterministic
given the seed: the sizes are planned before anything runs, memory is exact on the CPU backend and
the time lines come from counted work, not a clock; ``axes`` makes a skeleton of `--axis` texts.
"""

from __future__ import annotations

from calibration.infer.run import Inference, infer

__all__ = ["Inference", "infer"]
