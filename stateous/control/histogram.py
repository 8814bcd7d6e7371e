"""Histograms kept in memory: how long things take, and how large they are.

A histogram counts each observed value into the first bucket whose upper bound
holds it, and keeps their sum and count, as Prometheus histograms do. Several
threads observe at once, so every change holds a lock; reading takes a copy.
Nothing here is written to the database: these figures start again at zero
with the process, as the metrics' readers expect of a histogram.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from dataclasses import dataclass

#: Bounds for durations in seconds, from a tenth of a millisecond to ten seconds.
SECONDS: tuple[float, ...] = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05)
SECONDS += (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Bounds for sizes, such as the operations that one commit takes.
SIZES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


@dataclass(frozen=True, slots=True)
class Reading:
    """A histogram at one moment: the count of each bucket and of those before it
    (cumulative, as the exposition format wants), the sum and the count."""

    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]
    total: float
    count: int


class Histogram:
    """Values counted into buckets with these upper `bounds` (an implicit `+Inf` last)."""

    def __init__(self, bounds: tuple[float, ...] = SECONDS) -> None:
        self.bounds = bounds
        self._lock = threading.Lock()
        self._buckets = [0] * len(bounds)
        self._total = 0.0
        self._count = 0

    def observe(self, value: float) -> None:
        """Count one value: into the first bucket whose bound is at least `value`."""
        index = bisect_left(self.bounds, value)
        with self._lock:
            if index < len(self._buckets):
                self._buckets[index] += 1
            self._total += value
            self._count += 1

    def read(self) -> Reading:
        with self._lock:
            buckets, total, count = list(self._buckets), self._total, self._count
        running, cumulative = 0, []
        for found in buckets:
            running += found
            cumulative.append(running)
        return Reading(self.bounds, tuple(cumulative), total, count)


class WriterTimes:
    """What a store's writer did: the time of each commit, and how many operations each
    commit took together."""

    def __init__(self) -> None:
        self.commit_seconds = Histogram(SECONDS)
        self.batch_size = Histogram(SIZES)

    def committed(self, seconds: float, operations: int) -> None:
        self.commit_seconds.observe(seconds)
        self.batch_size.observe(float(operations))
