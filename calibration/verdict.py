"""Whether a calibration holds: the line a user reads last and the exit status a script gates on.

- memory holds when, with ``--verify``, every phase's bound (and the request's) is at least its
  measured peak, and no request failed;
- time is reported against its own uncertainty: the request's error within two sigma or not (a
  time miss is information, not a failure: time does not decide what fits on a device);
- ``--strict`` also fails on an actionable finding (``Finding.actionable``), on a param the target
  departs in that no size could move (the checks could not see a dependence on it), or on a
  component no phase saw active (``Calibration.unobserved``: its cost was never measured).

Exit statuses (docs/cli.md): 0 holds; 1 bad input; 2 usage; 3 a bug of ours; ``VERIFY_FAILED``
(4) a bound under the measured peak or a failed request; ``STRICT_FAILED`` (5) with ``--strict``,
an actionable finding, an uncovered param or an unobserved component.
"""

from __future__ import annotations

from attrs import frozen

from calibration.run import Calibration

VERIFY_FAILED = 4
STRICT_FAILED = 5


@frozen
class Verdict:
    """The calibration's verdict, in parts and as one line."""

    holds: bool
    status: int
    memory: str
    time: str
    findings: str

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


def _time(cal: Calibration) -> str:
    time = cal.request_time()
    spread = cal.estimate.timing.spread_s
    if time.error is None or time.predicted is None:
        return "time not verified"
    if spread is None:
        return f"time {time.error:+.1%} (no spread: scaled from one size)"
    two_sigma = 2 * spread * 1e3 / time.predicted
    within = "within" if abs(time.error) <= two_sigma else "outside"
    return f"time {time.error:+.1%}, {within} two sigma (±{two_sigma:.1%})"


def verdict(cal: Calibration, *, strict: bool = False) -> Verdict:
    """The verdict of ``cal``: with ``strict``, actionable findings and uncovered params fail."""
    memory, held = _memory(cal)
    failed = cal.errors
    if failed:
        memory += f"; {len(failed)} request{'s' if len(failed) > 1 else ''} failed"
        held = False
    actionable = [f for f in cal.findings if f.actionable]
    if actionable:
        shown = ", ".join(f"{f.kind} on {f.stage} {f.quantity}" for f in actionable)
        findings = f"{len(actionable)} to act on ({shown})"
    else:
        findings = "no finding to act on"
    if cal.uncovered:
        findings += f"; no size moved {', '.join(cal.uncovered)}"
    if cal.unobserved:
        findings += f"; never seen active: {', '.join(cal.unobserved)}"
    status = 0
    if not held:
        status = VERIFY_FAILED
    elif strict and (actionable or cal.uncovered or cal.unobserved):
        status = STRICT_FAILED
    return Verdict(status == 0, status, memory, _time(cal), findings)
