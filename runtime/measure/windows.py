"""Nested peak windows over a memory backend whose peak is reset at every boundary: the phases,
iterations and serving peaks of a request, written once over both backends
(``runtime.measure.backends``)."""

from __future__ import annotations

from attrs import define, field

from runtime.levels import Level, merged
from runtime.measure.backends import MemoryBackend


@define(eq=False)
class Window:
    """An open measuring window: the highest peaks seen in any segment while it was open."""

    peak_allocated: int = 0
    peak_reserved: int = 0
    peak_weights: int | None = None  # resident weights at the peak (None: the backend can't say)
    peak_activations: int | None = None  # the highest live bytes less weights (None: can't say)
    peak_levels: tuple[Level, ...] | None = None  # the activations' peak per weights (``levels``)

    def merge(self, other: Window) -> None:
        """Take in another window of the same phase: the higher peaks, the weights at the higher
        one, the activations' own highest."""
        if other.peak_allocated > self.peak_allocated:
            self.peak_weights = other.peak_weights
        if other.peak_activations is not None:
            self.peak_activations = max(self.peak_activations or 0, other.peak_activations)
        if other.peak_levels is not None:
            self.peak_levels = merged(self.peak_levels or (), other.peak_levels)
        self.peak_allocated = max(self.peak_allocated, other.peak_allocated)
        self.peak_reserved = max(self.peak_reserved, other.peak_reserved)


@define
class PeakWindows:
    """Nested peak windows over one resettable counter.

    At every boundary (a window opening or closing) the peak since the previous boundary is folded
    into every open window and the device peak is reset, so an inner window's reset never hides an
    outer window's peak. The same code serves CUDA and the CPU tracker.
    """

    backend: MemoryBackend
    _open: list[Window] = field(factory=list)

    def fold(self) -> None:
        """Bring every open window up to date and start a new segment."""
        allocated, reserved = self.backend.peak_allocated(), self.backend.peak_reserved()
        weights, activations = self._read("peak_weights"), self._read("peak_activations")
        levels = self._levels()
        for window in self._open:
            if allocated > window.peak_allocated or window.peak_weights is None:
                window.peak_weights = weights
            if activations is not None:
                seen = window.peak_activations
                window.peak_activations = activations if seen is None else max(seen, activations)
            if levels is not None:
                window.peak_levels = merged(window.peak_levels or (), levels)
            window.peak_allocated = max(window.peak_allocated, allocated)
            window.peak_reserved = max(window.peak_reserved, reserved)
        self.backend.reset_peak()

    def _read(self, what: str) -> int | None:
        """What the backend tells of its peak beyond the bytes, where it can (the CPU counter:
        ``peak_weights`` and ``peak_activations``; the CUDA allocator: the weights alone)."""
        read = getattr(self.backend, what, None)
        return int(read()) if callable(read) else None

    def _levels(self) -> tuple[Level, ...] | None:
        """The activations' peak per weights level, where the backend counts it (the CPU's)."""
        read = getattr(self.backend, "peak_levels", None)
        return tuple(read()) if callable(read) else None

    def open(self) -> Window:
        """Start a window at the current allocation."""
        self.fold()
        backend = self.backend
        window = Window(
            backend.peak_allocated(),
            backend.peak_reserved(),
            self._read("peak_weights"),
            self._read("peak_activations"),
            self._levels(),
        )
        self._open.append(window)
        return window

    def close(self, window: Window) -> Window:
        """End a window (in any order) and return its final peaks."""
        self.fold()
        self._open.remove(window)
        return window
