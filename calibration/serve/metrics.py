"""The worker's Prometheus metrics, in a registry of its own per app (two apps in one process,
as the tests make, never share a counter)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from calibration.serve.answer import Answer

#: Request time buckets, seconds: a tiny CPU example to a long video on a GPU.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class Metrics:
    """Every figure ``GET /metrics`` shows, updated by the app as requests come and go."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.peaks = Gauge(
            "wf_phase_peak_bytes",
            "The last served request's peak per phase, predicted and measured.",
            ["phase", "kind"],
            registry=r,
        )
        self.admissions = Counter(
            "wf_admissions", "Requests admitted, by decision.", ["decision"], registry=r
        )
        self.refusals = Counter(
            "wf_refusals", "Requests refused, by reason.", ["reason"], registry=r
        )
        self.replans = Counter("wf_replans", "Placements changed while serving.", registry=r)
        self.drift = Counter("wf_drift_events", "Phases measured above their bound.", registry=r)
        self.failures = Counter("wf_failures", "Admitted requests that failed.", registry=r)
        self.queue = Gauge("wf_queue_depth", "Requests waiting for the worker.", registry=r)
        self.seconds = Histogram(
            "wf_request_seconds", "Time of each served request.", buckets=BUCKETS, registry=r
        )

    def served(self, answer: Answer) -> None:
        self.admissions.labels(answer.decision).inc()
        self.seconds.observe(answer.seconds)
        for peak in answer.phases:
            for kind, value in (("predicted", peak.predicted), ("measured", peak.measured)):
                if value is not None:
                    self.peaks.labels(peak.phase, kind).set(value)
        if answer.drift:
            self.drift.inc()
        if answer.replanned:
            self.replans.inc()

    def refused(self, reason: str) -> None:
        self.refusals.labels(reason).inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)
