"""Serving traffic with the formulas: each request predicted under a placement, admitted, run
(docs/admission.md, docs/serving.md).

``predictor`` gives every phase's peak and bound and the request's time for any admissible
request (no torch); ``admission`` decides run, re-place or refuse before any work; ``worker``
serves one request at a time on a session the lifecycle validated; ``state``/``warm`` keep a
state folder for a warm start; ``app`` is its HTTP face.
"""
