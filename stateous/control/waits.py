"""Claims that wait for a task: `POST /tasks/claim` with `wait`.

A waiting claim holds one of the server's request threads, so a control plane holds
at most `limit` of them at once (by default two fewer than its threads): a claim
beyond that is answered at once, as a claim without `wait` is, and its supervisor
comes back after the answer's `Retry-After`. A write that queued tasks wakes, after
its commit (`Waking`, so the task is there to claim), one waiting claim of the task's
state per task queued, the longest waiting first, which claims again in a new
transaction; a claim woken that leaves without claiming (its client gone, its wait
over) wakes the others of its states in its place. A claim ends with nothing when its
wait ends or when the control plane stops (`close`). docs/design.md says why.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from stateous.control.defaults import DEFAULT_THREADS
from stateous.control.store.contract import PassingStore, Store, Tx

Result = TypeVar("Result")
Granted = TypeVar("Granted")

#: The longest wait a claim may ask for, in seconds.
LONGEST_WAIT = 30.0
#: Request threads that waiting claims leave to every other request.
FREE_THREADS = 2
#: Seconds after which a claim turned away for want of room to wait should come back (the
#: answer's `Retry-After`): the claims that wait take new tasks at once meanwhile.
COME_BACK = 3


def held_waits(threads: int) -> int:
    """How many claims may wait at once on a server of `threads` request threads."""
    return max(threads - FREE_THREADS, 0)


DEFAULT_WAITS = held_waits(DEFAULT_THREADS)


class _Waiter:
    """One waiting claim: the states it claims, and the event that wakes it."""

    __slots__ = ("states", "woken")

    def __init__(self, states: list[str]) -> None:
        self.states = frozenset(states)
        self.woken = threading.Event()


class Waits:
    """The claims that wait for a task, at most `limit` at once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._waiters: list[_Waiter] = []
        self._closed = False

    def wait(
        self,
        states: list[str],
        seconds: float,
        attempt: Callable[[], Granted | None],
        gone: Callable[[], bool] | None = None,
    ) -> Granted | None:
        """Run `attempt` (a claim), then again each time a task of `states` is queued,
        until it grants one or `seconds` have passed; None when nothing was granted.
        A client that `gone` says has left gets no more attempts: its grant would be
        answered to nobody, and its task held until the lease ends."""
        waiter = self._enter(states) if seconds > 0 else None
        if waiter is None:
            return attempt()
        deadline = time.monotonic() + seconds
        try:
            # Entered before the first attempt: a task queued during it wakes this claim.
            while True:
                grant = attempt()
                if grant is not None or self._closed:
                    return grant
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not waiter.woken.wait(remaining) or self._ended(gone):
                    return None
                waiter.woken.clear()
        finally:
            self._leave(waiter)

    def has_room(self) -> bool:
        """Whether a claim that asks to wait would wait now; a hint, which may change at once."""
        with self._lock:
            return not self._closed and len(self._waiters) < self.limit

    def _ended(self, gone: Callable[[], bool] | None) -> bool:
        return self._closed or (gone is not None and gone())

    def _enter(self, states: list[str]) -> _Waiter | None:
        with self._lock:
            if self._closed or len(self._waiters) >= self.limit:
                return None
            waiter = _Waiter(states)
            self._waiters.append(waiter)
            return waiter

    def _leave(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.remove(waiter)
            if waiter.woken.is_set():
                # Woken for a task that it leaves without claiming: the others may take it.
                self._wake(waiter.states)

    def queued(self, queued: Counter[str] | None) -> None:
        """Wake a waiting claim for each task queued, by its state (None: wake every one)."""
        with self._lock:
            if queued is None:
                self._wake(None)
                return
            left = Counter(queued)
            for waiter in self._waiters:
                if waiter.woken.is_set():
                    continue
                state = next((state for state in left if state in waiter.states), None)
                if state is not None:
                    waiter.woken.set()
                    left[state] -= 1
                    if not left[state]:
                        del left[state]

    def _wake(self, states: frozenset[str] | None) -> None:
        """Wake every waiting claim for any of `states` (None: all); the lock is held."""
        for waiter in self._waiters:
            if states is None or not waiter.states.isdisjoint(states):
                waiter.woken.set()

    def close(self) -> None:
        """End every waiting claim with nothing, and wait no more: the control plane stops."""
        with self._lock:
            self._closed = True
            self._wake(None)


class Waking(PassingStore):
    """A store whose writes, once committed, wake the claims waiting for what they queued."""

    def __init__(self, store: Store, waits: Waits) -> None:
        super().__init__(store)
        self.waits = waits

    def write(self, operation: Callable[[Tx], Result]) -> Result:
        noted: list[Counter[str] | None] = []

        def noting(tx: Tx) -> Result:
            result = operation(tx)
            noted.append(tx.queued_in)
            return result

        result = self.store.write(noting)
        # A store may run an operation twice (Postgres, after a conflict): the last counts.
        # None means the tasks queued are not known (every claim is woken); empty, none was.
        if noted and (noted[-1] is None or noted[-1]):
            self.waits.queued(noted[-1])
        return result
