"""The rank side of the lifecycle fuzzer's hang guard: the backend the recorder reads beats at every
counter read (torch comes with it; the guard that watches the beats, ``lifecycle_guard``, does not
import it)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from attrs import define

from runtime.measure.delegating import DelegatingBackend


@define
class Beating(DelegatingBackend):
    """``inner``, calling ``beat`` at every counter read: a rank's progress, seen from outside."""

    beat: Callable[[], None]

    def current_allocated(self) -> int:
        self.beat()
        return self.inner.current_allocated()

    def peak_allocated(self) -> int:
        self.beat()
        return self.inner.peak_allocated()

    def tracking(self) -> contextlib.AbstractContextManager[object]:
        self.beat()
        return self.inner.tracking()
