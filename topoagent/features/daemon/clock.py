"""The daemon's clock: the one place its loop reads the time and waits.

The loop never calls :mod:`time` itself; it is given a clock (``Daemon(clock=...)``), so a test
can hand it a clock whose time moves only when the test says, and check debounce, link
sampling and the hung-scan timeout without waiting for them in real time.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """What the loop needs of a clock."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for deadlines)."""

    def time(self) -> float:
        """Seconds since the epoch (for timestamps)."""

    def wait(self, selector: Any, timeout: float | None) -> list[Any]:
        """The selector's ready events, after at most ``timeout`` seconds (None: until one is ready)."""


class SystemClock:
    """The real clock: ``time.monotonic`` for deadlines, ``time.time`` for timestamps, and a
    wait that is the selector's own timeout."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (deadlines, durations)."""
        return time.monotonic()

    def time(self) -> float:
        """Seconds since the epoch (timestamps people and exports read)."""
        return time.time()

    def wait(self, selector: Any, timeout: float | None) -> list[Any]:
        """The selector's ready keys, waiting at most ``timeout`` seconds (None: until one is)."""
        ready: list[Any] = selector.select(timeout)
        return ready
