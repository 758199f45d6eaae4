"""`dslc infer`: measure a pipeline on a bounded ladder of cheap sizes and propose its formulas.

``infer`` runs discovery (``layout``), the ladder (``ladder``) through the same ``Session`` and
recorder as `calibrate` (``measure``), the exact searches (``analyse``, ``search``, ``terms``) and
writes the draft (``draft``); ``report`` is the JSON document. Deterministic given the seed: the
sizes are planned before anything runs, the memory searches are exact on the CPU backend and the
`time ~` choice (``time_terms``) tries one fixed order of candidates against the measured spread,
writing no number that noise moves; ``axes`` makes a skeleton of `--axis` texts.
"""

from __future__ import annotations

from calibration.infer.run import Inference, infer

__all__ = ["Inference", "infer"]
