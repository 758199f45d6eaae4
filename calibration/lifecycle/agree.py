"""Ranks agree on what decides a placement, so that every rank ends on the same, most cautious one.

Built on ``runtime.measure.distributed.Agreement`` (the MAX of an integer over the group, gloo or
NCCL; a single process agrees with itself): phase bounds are agreed elementwise (the largest wins),
a validation's failure by its severity (any rank's failure fails all), and a placement by a
fingerprint that must be the same on every rank.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from calibration.errors import CalibrationError
from calibration.lifecycle.model import Failure
from calibration.plan.model import Plan
from runtime.measure.distributed import Agreement


class RankMismatchError(CalibrationError):
    """Ranks planned different phases or ended on different placements (they must not)."""


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big") >> 2


def same_everywhere(agreement: Agreement, text: str, what: str) -> None:
    """Raise unless ``text`` is the same on every rank (its digest's MAX equals its MIN)."""
    fp = _digest(text)
    if agreement.max_int(fp) != -agreement.max_int(-fp):
        raise RankMismatchError(f"ranks differ in {what}")


def max_each(agreement: Agreement, values: Sequence[int], what: str) -> list[int]:
    """The MAX over ranks of each value (the same count on every rank, checked first)."""
    same_everywhere(agreement, str(len(values)), f"the number of {what}")
    return [agreement.max_int(v) for v in values]


def worst_failure(agreement: Agreement, failure: Failure) -> Failure:
    """The most cautious validation outcome over the ranks."""
    return Failure.of_severity(agreement.max_int(failure.severity))


def placement_key(plan: Plan) -> str:
    """A placement as text: each component's kind and the layers it keeps (what must agree)."""
    return ";".join(
        f"{p.component}={p.kind.value}:{','.join(map(str, p.resident_layers))}"
        for p in plan.placements
    )
