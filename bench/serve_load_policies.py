"""bench/serve_load.py's throughput, side by side on one worker and one trace: exact admission
beside (a) the placement planned for the trace's largest shape with no admission and (b) a
per-request area x factor rule like ComfyUI's ``memory_required`` (the factor fitted to the
probe). A request of (a) or (b) measured above capacity - reserve counts as an out-of-memory
failure (on a GPU it would be one); its time counts, as the work a failed request wastes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

from attrs import frozen

from artifact.point import Point
from calibration.plan.model import Device, Plan
from calibration.serve.admission import RequestRefused
from calibration.serve.admitted import AdmittedWorker
from runtime import FormulaError

#: A device no request exceeds: admission says RUN to every request (no admission at all).
UNCAPPED = Device(1 << 50, reserve_bytes=0)


@frozen
class PolicyRow:
    """One policy over the trace: requests served within the cap, refused, out of memory."""

    policy: str
    ok: int
    refused: int
    oom: int
    seconds: float  # every request that ran, the out-of-memory ones too

    @property
    def per_s(self) -> float:
        return self.ok / self.seconds if self.seconds > 0 else 0.0


@contextlib.contextmanager
def uncapped(worker: AdmittedWorker, plan: Plan | None) -> Iterator[None]:
    """``plan`` in force and every request run under it; the validated placement back after."""
    inner = worker.inner
    plan_before, device_before = inner.plan, inner.device
    worker._place(plan)  # the worker's own re-placing, as its re-plan after a drift does
    inner.device = UNCAPPED
    try:
        yield
    finally:
        inner.device = device_before
        worker._place(plan_before)


def _area(params: Point) -> int:
    """Pixels a request denoises (frames and batch multiply them where the pipeline has them)."""
    area = int(params["height"]) * int(params["width"])
    for name in ("frames", "batch"):
        if isinstance(params.get(name), int):
            area *= int(params[name])
    return area


def _ran(worker: AdmittedWorker, requests: Sequence[Point], usable: int) -> tuple[int, int, float]:
    """Each request run as admission decides: (within the cap, above it, seconds)."""
    ok = oom = 0
    seconds = 0.0
    for params in requests:
        served = worker.inner.serve(params)
        seconds += served.seconds + served.placing_s
        if served.peak_bytes > usable:
            oom += 1
        else:
            ok += 1
    return ok, oom, seconds


def _admitted(worker: AdmittedWorker, requests: Sequence[Point]) -> PolicyRow:
    usable = worker.inner.device.usable_bytes
    ran, refused = [], 0
    for params in requests:
        try:
            ran.append(worker.inner.serve(params))
        except RequestRefused:
            refused += 1
    oom = sum(1 for s in ran if s.peak_bytes > usable)
    seconds = sum(s.seconds + s.placing_s for s in ran)
    return PolicyRow("admission", len(ran) - oom, refused, oom, seconds)


def _largest_plan(worker: AdmittedWorker, requests: Sequence[Point]) -> Plan | None:
    """The plan of the largest request shape a plan fits (the validated one when none larger)."""
    inner = worker.inner
    predictor, device = inner.predictor, inner.device
    by_size = sorted(requests, key=lambda p: predictor.predict(p).bound_bytes, reverse=True)
    for params in by_size:
        plan = inner.planner.plan_for(predictor, params, device)
        if plan.feasible and predictor.predict(params, plan).fits(device.usable_bytes):
            return plan
    return inner.plan


def _largest(worker: AdmittedWorker, requests: Sequence[Point]) -> PolicyRow:
    usable = worker.inner.device.usable_bytes
    with uncapped(worker, _largest_plan(worker, requests)):
        ok, oom, seconds = _ran(worker, requests, usable)
    return PolicyRow("largest plan, no admission", ok, 0, oom, seconds)


def _area_factor(worker: AdmittedWorker, requests: Sequence[Point], probe: Point) -> PolicyRow:
    """Admit when resident weights + area x factor fit, the factor fitted on one probe run."""
    usable = worker.inner.device.usable_bytes
    with uncapped(worker, worker.inner.plan):
        fitted = worker.inner.serve(probe)
        resident = max(p.weights_bytes for p in fitted.prediction.phases)
        factor = max(0, fitted.peak_bytes - resident) / _area(probe)
        admitted = [p for p in requests if resident + factor * _area(p) <= usable]
        ok, oom, seconds = _ran(worker, admitted, usable)
    return PolicyRow("area x factor", ok, len(requests) - len(admitted), oom, seconds)


def policies(
    worker: AdmittedWorker, bodies: Sequence[Mapping[str, object]], probe: Point
) -> list[PolicyRow]:
    """The three policies over ``bodies`` (each over the worker's defaults; inadmissible ones
    left out: every policy refuses those alike)."""
    requests: list[Point] = []
    for body in bodies:
        params = {**worker.defaults, **body}
        point = {k: v for k, v in params.items() if isinstance(v, int)}  # bools are ints
        if len(point) < len(params):
            continue  # a wrong type: inadmissible
        try:
            worker.inner.predictor.predict(point)
        except FormulaError:  # inadmissible: not part of the comparison
            continue
        requests.append(point)
    full_probe = {**worker.defaults, **probe}
    return [
        _admitted(worker, requests),
        _largest(worker, requests),
        _area_factor(worker, requests, full_probe),
    ]
