"""The tests' hand on a serving control plane's clock, and nothing else's.

When `STATEOUS_TEST_CLOCK_FILE` names a file, `stateous serve` adds the number of seconds
that the file holds to the wall clock of every transaction (leases, timers, schedules),
and reads the file again whenever it changes; so a test moves a real process's time
forward by writing a number. Unset, the clock is `time.time` and this module costs nothing.
It is meant for tests only: a control plane in production never sets it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

VARIABLE = "STATEOUS_TEST_CLOCK_FILE"


class OffsetClock:
    """The wall clock plus the seconds a file holds (0 while it is missing or unreadable)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.seen: int | None = None
        self.offset = 0.0

    def __call__(self) -> float:
        try:
            stamp = os.stat(self.path).st_mtime_ns
        except OSError:
            return time.time() + self.offset
        if stamp != self.seen:
            self.seen = stamp
            try:
                with open(self.path, encoding="ascii") as file:
                    self.offset = float(file.read().strip() or 0)
            except (OSError, ValueError):
                self.seen = None
        return time.time() + self.offset


def serving_clock() -> Callable[[], float]:
    """The clock of `serve`: the wall clock, or the tests' when the variable is set."""
    path = os.environ.get(VARIABLE)
    return OffsetClock(path) if path else time.time
