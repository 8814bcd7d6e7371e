"""Claims that wait for a task: `POST /tasks/claim` with `wait`.

A waiting claim holds no request thread: the HTTP server takes its connection out of
its loop into the waiting room (`http/parked_claims.py`) until a task of its states is
queued, its wait ends, its client leaves or sends more, or the control plane stops.
A control plane holds at most `limit` waiting claims (by default as many as it has
open connections); a claim beyond that is answered at once, as a claim without `wait`
is, and told by the answer's `Retry-After` when to come back.

A write that queued tasks wakes, after its commit (`Waking`, so the task is there to
claim), one waiting claim of the task's queue per task queued (of its state, and of its
contract, which a claim that names its supervisor's graph waits on instead), the
longest waiting first, which claims again in a new transaction; a claim woken that leaves without
claiming (its client gone, its wait over) wakes the others of its states in its place.
docs/design.md says why.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from stateous.control.defaults import DEFAULT_CONNECTION_LIMIT
from stateous.control.store.contract import PassingStore, Store, Tx
from stateous.control.store.turn import joined

Result = TypeVar("Result")

#: The longest wait a claim may ask for, in seconds.
LONGEST_WAIT = 30.0
#: Seconds after which a claim turned away for want of room to wait should come back (the
#: answer's `Retry-After`): the claims that wait take new tasks at once meanwhile.
COME_BACK = 3
#: Waiting claims held at once by default: as many as the connections a server keeps open.
DEFAULT_WAITS = DEFAULT_CONNECTION_LIMIT

Listener = Callable[[], None]


class Waiter:
    """One waiting claim: its queues (`states`: state names, or contracts), when its wait
    ends, and whether a task woke it."""

    __slots__ = ("_listener", "_waits", "arrived", "deadline", "states", "woken")

    def __init__(self, waits: Waits, states: list[str], seconds: float) -> None:
        self.states = frozenset(states)
        self.deadline = time.monotonic() + seconds
        #: When the claim arrived (perf_counter), for the time its answer took.
        self.arrived = time.perf_counter()
        #: Woken since its last attempt: a task of its states was queued meanwhile.
        self.woken = False
        self._listener: Listener | None = None
        self._waits = waits

    def may_wait(self) -> bool:
        """Whether the claim may wait on: its wait not over, the control plane not stopping."""
        return not self._waits.closed and time.monotonic() < self.deadline

    def stopping(self) -> bool:
        """Whether the control plane stops: the claim is answered with nothing at once."""
        return self._waits.closed

    def end_wait(self) -> None:
        """End the wait early: its client sent more, which is answered after this claim."""
        self.deadline = 0.0

    def rewind(self) -> None:
        """Forget a wake before an attempt: a task queued during the attempt wakes it again."""
        self._waits.rewind(self)

    def listen(self, listener: Listener) -> bool:
        """Call `listener` once at the next wake, from the thread that wakes; False (and no
        call) when a wake came already since the last attempt."""
        return self._waits.listen(self, listener)

    def leave(self) -> None:
        """Stop waiting: the claim is answered."""
        self._waits.leave(self)


class Waits:
    """The claims that wait for a task, at most `limit` at once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._waiters: list[Waiter] = []
        #: The waiters of each state, the longest waiting first: a task queued in a state
        #: that nobody waits for costs one lookup, however many claims wait.
        self._by_state: dict[str, list[Waiter]] = {}
        self.closed = False

    def enter(self, states: list[str], seconds: float) -> Waiter | None:
        """A waiter for a claim of the queues `states` that may wait `seconds`, entered
        before its first attempt so that a task queued during it wakes it; None when there
        is no room."""
        with self._lock:
            if self.closed or len(self._waiters) >= self.limit:
                return None
            waiter = Waiter(self, states, seconds)
            self._waiters.append(waiter)
            for state in waiter.states:
                self._by_state.setdefault(state, []).append(waiter)
            return waiter

    def rewind(self, waiter: Waiter) -> None:
        with self._lock:
            waiter.woken = False

    def listen(self, waiter: Waiter, listener: Listener) -> bool:
        with self._lock:
            if waiter.woken or self.closed:
                return False
            waiter._listener = listener
            return True

    def leave(self, waiter: Waiter) -> None:
        with self._lock:
            self._waiters.remove(waiter)
            for state in waiter.states:
                waiting = self._by_state[state]
                waiting.remove(waiter)
                if not waiting:
                    del self._by_state[state]
            waiter._listener = None
            # Woken for a task that it leaves without claiming: the others may take it.
            called = self._wake_all(waiter.states) if waiter.woken else []
        _call(called)

    def queued(self, queued: Counter[str] | None) -> None:
        """Wake a waiting claim for each task queued, by its state (None: wake every one)."""
        with self._lock:
            if not self._waiters:
                return  # a busy fleet: nobody waits
            called = self._wake_all(None) if queued is None else self._wake_some(queued)
        _call(called)

    def close(self) -> None:
        """End every waiting claim with nothing, and wait no more: the control plane stops."""
        with self._lock:
            self.closed = True
            called = self._wake_all(None)
        _call(called)

    def _wake_some(self, queued: Counter[str]) -> list[Listener]:
        """Wake one claim per task queued, the longest waiting first; the lock is held."""
        called = []
        for state, count in queued.items():
            left = count
            for waiter in self._by_state.get(state, ()):
                if not left:
                    break
                if not waiter.woken:
                    called += self._wake(waiter)
                    left -= 1
        return called

    def _wake_all(self, states: frozenset[str] | None) -> list[Listener]:
        """Wake every waiting claim for any of `states` (None: all); the lock is held."""
        if states is None:
            waiters = self._waiters
        else:
            waiters = [each for state in states for each in self._by_state.get(state, ())]
        called = []
        for waiter in waiters:
            if not waiter.woken:
                called += self._wake(waiter)
        return called

    @staticmethod
    def _wake(waiter: Waiter) -> list[Listener]:
        waiter.woken = True
        listener, waiter._listener = waiter._listener, None
        return [] if listener is None else [listener]


def _call(listeners: list[Listener]) -> None:
    """Call the listeners of the claims woken, outside the lock (each takes its own)."""
    for listener in listeners:
        listener()


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
            queued = noted[-1]
            joined().after(lambda: self.waits.queued(queued))
        return result
