"""The lifecycle fuzzer's hang guard, by progress rather than by total time: a rank beats at
every memory counter read of its requests (``lifecycle_beating.Beating``, around the backend the
recorder reads, counting into ``beater``'s shared value), and a case hangs when a rank stays
silent longer than ``SILENCE_TIMEOUTS`` rank timeouts (every collective wait is bounded by one, a
late rank's stall by 1.5), or a fresh process's first beat (spawn, imports, a gloo group) takes
longer than ``START_S``. A loaded machine slows the beats, it does not stop them; a rank blocked
in an unbounded wait stops them. ``CAP_S`` bounds a case that keeps beating forever (a livelock),
the only total-time bound left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from attrs import define, field

#: How many rank timeouts a rank may stay silent (no counter read) before its case is a hang.
SILENCE_TIMEOUTS = 6
#: The longest a fresh process may take to its first beat (seconds): spawn, imports, a gloo group.
START_S = 600.0
#: The longest a case may run while it keeps beating (seconds): a livelock's bound.
CAP_S = 1800.0
#: The findings a fuzz run counts; any of them makes its verdict non-zero.
FINDINGS = ("hangs", "exit 3", "states differing", "not restored")


class Shared(Protocol):
    """A count shared between processes (``multiprocessing.Value("q")``)."""

    value: int


def beater(shared: Shared | None) -> Callable[[], None]:
    """A beat that counts into ``shared`` (None: a beat nobody watches)."""
    if shared is None:
        return lambda: None

    def beat() -> None:
        shared.value += 1

    return beat


@define
class Watch:
    """Whether a case's ranks still progress, from each rank's beat count (``hung``)."""

    silence_s: float
    start: Sequence[int]  # each rank's beats when the case began
    fresh: Sequence[bool]  # per rank: a fresh process (its first beat may take ``START_S``)
    clock: Callable[[], float] = time.monotonic
    _began: float = field(init=False)
    _count: list[int] = field(init=False)
    _since: list[float] = field(init=False)
    _moved: list[bool] = field(init=False)

    def __attrs_post_init__(self) -> None:
        self._began = self.clock()
        self._count = list(self.start)
        self._since = [self._began] * len(self.start)
        self._moved = [False] * len(self.start)

    def hung(self, beats: Sequence[int | None]) -> str:
        """Why the case hangs ("": it progresses), given each rank's beats now (None: a rank
        that ended, silent by right)."""
        now = self.clock()
        if now - self._began > CAP_S:
            return f"no end within {CAP_S:.0f} s, though it progresses (a livelock?)"
        for rank, count in enumerate(beats):
            if count is None:
                continue
            if count != self._count[rank]:
                self._count[rank], self._since[rank], self._moved[rank] = count, now, True
            waited = self._moved[rank] or not self.fresh[rank]
            limit = self.silence_s if waited else START_S
            silent = now - self._since[rank]
            if silent > limit:
                return f"rank {rank} made no progress for {silent:.0f} s (guard {limit:.0f} s)"
        return ""


def silence_s(rank_timeout_s: float) -> float:
    """How long a rank may stay silent: ``SILENCE_TIMEOUTS`` rank timeouts."""
    return SILENCE_TIMEOUTS * rank_timeout_s


def replay(seed: int, index: int) -> str:
    """The command that runs case ``index`` of ``seed`` alone."""
    script = "nice -n 19 .venv/bin/python bench/lifecycle_fuzz.py"
    return f"{script} --seed {seed} --first {index} --cases 1"


def verdict(counts: Mapping[str, Mapping[str, int]]) -> int:
    """The run's exit status: 1 when any case found anything of ``FINDINGS``, else 0."""
    return int(any(found.get(what, 0) for found in counts.values() for what in FINDINGS))
