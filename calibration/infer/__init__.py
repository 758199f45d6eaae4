"""`dslc infer`: measure a pipeline on a bounded ladder of cheap sizes and propose its formulas.

``infer`` runs discovery (``layout``), the ladder (``ladder``) through the same ``Session`` and
recorder as `calibrate` (``measure``), the exact searches (``analyse``, ``search``, ``terms``) and
writes the draft (``draft``); ``report`` is the JSON document. Deterministic given the seed: the
sizes are planned before anything runs and the memory searches are exact on the CPU backend.
"""

from __future__ import annotations

from calibration.infer.run import Inference, infer

__all__ = ["Inference", "infer"]
