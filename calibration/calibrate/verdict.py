"""Whether a calibration holds: the line a user reads last and the exit status a script gates on.

- memory holds when, with ``--verify``, every phase's bound (and the request's) is at least its
  measured peak, and no request failed;
- time is reported against its own uncertainty: the request's error within two sigma or not (a
  time miss is information, not a failure: time does not decide what fits on a device); a two-sigma
  band wider than the prediction itself says nothing, so the time is then unknown;
- ``--strict`` also fails on an actionable finding (``Finding.actionable``), on a param the target
  departs in that no size could move (the checks could not see a dependence on it), on a
  component no phase saw active (``Calibration.unobserved``: its cost was never measured), or on a
  `call` argument the pipeline takes only through ``**kwargs`` that no measured pair of sizes showed
  to change the call's memory or work (``calibration.core.calls.unproven_calls``): it may never
  arrive.

A request's predicted peak more than ``OVER_PREDICTION`` over its measured peak is a note
(``over_prediction``), not a failure: the bound is safe, but a budget that loose is a figure to
distrust, so the verdict never says "no finding to act on" beside it.

Exit statuses (docs/cli.md): 0 holds; 1 bad input; 2 usage; 3 a bug of ours; ``VERIFY_FAILED``
(4) a bound under the measured peak or a failed request; ``STRICT_FAILED`` (5) with ``--strict``,
an actionable finding, an uncovered param, an unobserved component or an unproven `call` argument.
"""

from __future__ import annotations

from enum import Enum

from attrs import frozen

from artifact.units import show_bytes
from calibration.calibrate.run import Calibration

VERIFY_FAILED = 4
STRICT_FAILED = 5

#: How far the request's predicted peak may sit over its measured peak before the verdict notes
#: it: the project's examples hold their phases within a few percent (bench/verdicts.py), so +25 %
#: is no noise but a request peak carried from something that does not scale as it does.
OVER_PREDICTION = 0.25


class TimeCheck(Enum):
    """How the request's measured time compares with the prediction's two-sigma band."""

    NOT_VERIFIED = "not-verified"  # no measured target run (or no prediction)
    NO_SPREAD = "no-spread"  # scaled from one size: no band to compare with
    WITHIN = "within"
    OUTSIDE = "outside"
    UNKNOWN = "unknown"  # the band is wider than the prediction: any time would be "within"


@frozen
class Verdict:
    """The calibration's verdict, in parts and as one line."""

    holds: bool
    status: int
    memory: str
    time: str
    findings: str
    time_check: TimeCheck

    @property
    def line(self) -> str:
        head = "holds" if self.holds else f"DOES NOT HOLD (exit {self.status})"
        return f"verdict: {head}: {self.memory}; {self.time}; {self.findings}"


def _memory(cal: Calibration) -> tuple[str, bool]:
    if cal.measured is None:
        return "memory not verified (run with --verify)", True
    if not cal.measured.ok:
        return "the target's run failed", False
    compared = [
        c
        for c in [*cal.phases(), cal.request_peak()]
        if c.bound is not None and c.measured is not None
    ]
    under = [c.label for c in compared if c.bound is not None and c.bound < (c.measured or 0)]
    held = len(compared) - len(under)
    text = f"memory bounds held in {held} of {len(compared)} phases"
    if under:
        text += f" (under the measured peak: {', '.join(under)})"
    return text, not under


def time_check(
    predicted_ms: float | None, error: float | None, spread_s: float | None
) -> tuple[TimeCheck, str]:
    """The time part of the verdict: the error against two sigma, unknown when the band is wider
    than the prediction itself (a time anywhere from zero to twice the prediction would "hold")."""
    if error is None or predicted_ms is None:
        return TimeCheck.NOT_VERIFIED, "time not verified"
    if spread_s is None:
        return TimeCheck.NO_SPREAD, f"time {error:+.1%} (no spread: scaled from one size)"
    two_sigma = 2 * spread_s * 1e3 / predicted_ms
    if two_sigma > 1:
        return TimeCheck.UNKNOWN, (
            f"time unknown: band ±{two_sigma:.0%} wider than the prediction (measured {error:+.1%})"
        )
    if abs(error) <= two_sigma:
        return TimeCheck.WITHIN, f"time {error:+.1%}, within two sigma (±{two_sigma:.1%})"
    return TimeCheck.OUTSIDE, f"time {error:+.1%}, outside two sigma (±{two_sigma:.1%})"


def verdict(cal: Calibration, *, strict: bool = False) -> Verdict:
    """The verdict of ``cal``: with ``strict``, actionable findings, uncovered params and unproven
    `call` arguments fail."""
    memory, held = _memory(cal)
    failed = cal.errors
    if failed:
        memory += f"; {len(failed)} request{'s' if len(failed) > 1 else ''} failed"
        held = False
    actionable = [f for f in cal.findings if f.actionable]
    over = over_prediction(cal)
    if actionable:
        shown = ", ".join(f"{f.kind} on {f.stage} {f.quantity}" for f in actionable)
        findings = f"{len(actionable)} to act on ({shown})"
    elif over is None:
        findings = "no finding to act on"
    if over is not None:
        note = f"1 note: {over.headline} (note[{OVER_PREDICTED}])"
        findings = f"{findings}; {note}" if actionable else note
    if cal.uncovered:
        findings += f"; no size moved {', '.join(cal.uncovered)}"
    if cal.unobserved:
        findings += f"; never seen active: {', '.join(cal.unobserved)}"
    findings += "".join(f"; {call.message}" for call in cal.unproven_calls)
    status = 0
    if not held:
        status = VERIFY_FAILED
    elif strict and (actionable or cal.uncovered or cal.unobserved or cal.unproven_calls):
        status = STRICT_FAILED
    time = cal.request_time()
    check, said = time_check(time.predicted, time.error, cal.estimate.timing.spread_s)
    return Verdict(status == 0, status, memory, said, findings, check)


OVER_PREDICTED = "request-over-predicted"


@frozen
class OverPrediction:
    """The request's peak predicted well over what the target measured: safe, but loose."""

    headline: str  # the verdict's part
    message: str  # the note: the row, the figures and why


def over_prediction(cal: Calibration) -> OverPrediction | None:
    """A note when the request row's predicted peak is over ``OVER_PREDICTION`` above its measured
    peak (the table's error column), naming the row, its figures and where the figure came from."""
    request = cal.request_peak()
    error = request.error
    if error is None or error <= OVER_PREDICTION or request.measured is None:
        return None
    phases = [c.bound for c in cal.phases() if c.bound is not None and c.measured is not None]
    largest = f" (the largest: {show_bytes(max(phases))})" if phases else ""
    message = (
        f"the request row predicts {show_bytes(request.predicted)} (bound "
        f"{show_bytes(request.bound)}), {error:+.1%} over its measured peak "
        f"{show_bytes(request.measured)} (noted past +{OVER_PREDICTION:.0%}; safe, but loose): it "
        f"is {request.reason}; the peaks it was carried from held more than grows with that "
        "measure (weights, what other phases keep); next: the phase rows' bounds"
        f"{largest} are the closer budget; to tighten the request row, give the stage it is "
        "scaled with the terms the request's peak follows"
    )
    headline = f"the request's peak is predicted {error:+.1%} over its measured peak"
    return OverPrediction(headline, message)
