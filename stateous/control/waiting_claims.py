"""Claims that wait for a task: `POST /tasks/claim` with `wait`.

A waiting claim holds no request thread: the HTTP server takes its connection out of
its loop into the waiting room (`http/parked_claims.py`) until a task of its states is
queued, its wait ends, its client leaves or sends more, or the control plane stops.
A control plane holds at most `limit` waiting claims (by default as many as it has
open connections); a claim beyond that is answered at once, as a claim without `wait`
is, and told by the answer's `Retry-After` when to come back.

A write that queued tasks hands each to a claim that waits for its queue (of its state,
or of its contract, which a claim that names its supervisor's graph waits on instead),
the longest waiting first, in the write's own transaction (`Waking`): the claim decides
there as it would have in a transaction of its own (`Ask`), and once the write commits it
is answered with its grant, without a transaction more. A task that no waiting claim
took that way wakes one of its queue after the commit, which claims again in a new
transaction; a claim woken that leaves without claiming (its client gone, its wait over)
wakes the others of its states in its place. docs/design.md says why.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from stateous.control.defaults import DEFAULT_CONNECTION_LIMIT
from stateous.control.store import Queues
from stateous.control.store.contract import PassingStore, Store, Tx
from stateous.control.store.turn import joined
from stateous.model.wire import Grant

Result = TypeVar("Result")

#: The longest wait a claim may ask for, in seconds.
LONGEST_WAIT = 30.0
#: Seconds after which a claim turned away for want of room to wait should come back (the
#: answer's `Retry-After`): the claims that wait take new tasks at once meanwhile.
COME_BACK = 3
#: Waiting claims held at once by default: as many as the connections a server keeps open.
DEFAULT_WAITS = DEFAULT_CONNECTION_LIMIT

Listener = Callable[[], None]


class Ask(NamedTuple):
    """What a waiting claim asks, as its own transaction would take it: who, from which
    queues, under which request id, the labels its claim row is to keep (None: kept), and
    the credential it was made with (None: none)."""

    supervisor: str
    queues: Queues
    request: str | None
    labels: dict[str, str] | None
    by: str | None = None


#: Decides, in a write's transaction, what a waiting claim is granted (None: nothing).
HandOff = Callable[[Tx, Ask], Grant | None]


class Waiter:
    """One waiting claim: what it asks, its queues (`states`: state names, or contracts),
    when its wait ends, whether a task woke it, and the grant a write handed it."""

    __slots__ = (
        "_listener",
        "_waits",
        "arrived",
        "ask",
        "deadline",
        "handed",
        "states",
        "taken",
        "woken",
    )

    def __init__(self, waits: Waits, ask: Ask, seconds: float) -> None:
        self.ask = ask
        self.states = frozenset(ask.queues.keys)
        self.deadline = time.monotonic() + seconds
        #: When the claim arrived (perf_counter), for the time its answer took.
        self.arrived = time.perf_counter()
        #: Woken since its last attempt: a task of its states was queued meanwhile.
        self.woken = False
        #: The grant a write handed this claim in its transaction, once that committed.
        self.handed: Grant | None = None
        #: Taken by a write that may hand it a grant: it is served again only after.
        self.taken = False
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

    def may_go(self) -> bool:
        """Whether the claim may be served again now (its wait over, its client acting), out
        of every write's reach from then on; False while a write that may hand it a grant
        holds it, which serves it after."""
        return self._waits.may_go(self)

    def may_be_granted(self) -> bool:
        """Whether a write holds the claim or handed it a grant: as the control plane stops,
        it is cut without an answer, never told that nothing was granted."""
        return self._waits.may_be_granted(self)


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

    def enter(self, ask: Ask, seconds: float) -> Waiter | None:
        """A waiter for a claim that asks `ask` and may wait `seconds`, entered before its
        first attempt so that a task queued during it wakes it; None when there is no room."""
        with self._lock:
            if self.closed or len(self._waiters) >= self.limit:
                return None
            waiter = Waiter(self, ask, seconds)
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

    def may_go(self, waiter: Waiter) -> bool:
        with self._lock:
            if waiter.taken:
                waiter.woken = True  # `give_back` serves it again at once
                return False
            # Served again now and answered soon: a write must not grant it a task that
            # its answer would not carry.
            waiter._listener = None
            return True

    def may_be_granted(self, waiter: Waiter) -> bool:
        with self._lock:
            return waiter.taken or waiter.handed is not None

    def leave(self, waiter: Waiter) -> None:
        with self._lock:
            if waiter not in self._waiters:
                return  # left already: a claim refused after it was served again
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

    def take(self, state: str) -> tuple[Waiter, Listener] | None:
        """The claim that has waited longest for `state` and listens (its attempt over, not
        woken), out of the waits' reach until `hand` or `give_back`; None when none does."""
        with self._lock:
            for waiter in self._by_state.get(state, ()):
                listener = waiter._listener
                if listener is not None and not waiter.woken:
                    waiter._listener, waiter.taken = None, True
                    return waiter, listener
        return None

    def hand(self, waiter: Waiter, listener: Listener, grant: Grant) -> None:
        """Answer a claim `take` took with the grant its write's commit kept."""
        with self._lock:
            waiter.handed, waiter.woken, waiter.taken = grant, True, False
        listener()

    def give_back(self, waiter: Waiter, listener: Listener) -> None:
        """Let a claim `take` took wait on; woken meanwhile, or its wait over, it is served
        again at once."""
        with self._lock:
            waiter.taken = False
            if not (waiter.woken or self.closed or time.monotonic() >= waiter.deadline):
                waiter._listener = listener
                return
        listener()

    def close(self) -> None:
        """End every waiting claim with nothing, and wait no more: the control plane stops."""
        with self._lock:
            self.closed = True
            called = self._wake_all(None)
        _call(called)

    def _wake_some(self, queued: Counter[str]) -> list[Listener]:
        """Wake one claim per task queued, the longest waiting first, those that a write
        holds last (one that hands them a grant would spend the wake); the lock is held."""
        called = []
        for state, count in queued.items():
            free: list[Waiter] = []
            held: list[Waiter] = []
            for waiter in self._by_state.get(state, ()):
                if len(free) == count:
                    break
                if not waiter.woken:
                    (held if waiter.taken else free).append(waiter)
            for waiter in (free + held)[:count]:
                called += self._wake(waiter)
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


#: A waiting claim taken by a write, its listener, and the grant the write handed it.
Taken = tuple[Waiter, Listener, Grant]


class Waking(PassingStore):
    """A store whose writes hand the tasks they queue to the claims waiting for them
    (`hand_off` decides, in the write's transaction), and once committed, answer those
    claims and wake one waiting claim for each task queued that none took."""

    def __init__(self, store: Store, waits: Waits, hand_off: HandOff | None = None) -> None:
        super().__init__(store)
        self.waits = waits
        self.hand_off = hand_off

    def write(self, operation: Callable[[Tx], Result]) -> Result:
        noted: list[Counter[str] | None] = []
        taken: list[Taken] = []

        def noting(tx: Tx) -> Result:
            self._give_back(taken)  # a run before this one rolled back
            result = operation(tx)
            noted.append(self._handed_off(tx, tx.queued_in, taken))
            return result

        try:
            result = self.store.write(noting)
        except BaseException:
            self._give_back(taken)
            raise
        # A store may run an operation twice (Postgres, after a conflict): the last counts.
        # None means the tasks queued are not known (every claim is woken); empty, none was.
        queued = noted[-1] if noted else Counter()
        if taken or queued is None or queued:
            joined().after(lambda: self._committed(taken, queued), lambda: self._give_back(taken))
        return result

    def _handed_off(
        self, tx: Tx, queued: Counter[str] | None, taken: list[Taken]
    ) -> Counter[str] | None:
        """Hand the tasks `tx` queued to the claims that wait for their queues, the longest
        waiting first, each deciding in `tx` (`hand_off`); answer the tasks that none took,
        by queue, for the wakes after the commit."""
        if not queued or self.hand_off is None:
            return queued
        left = Counter(queued)
        for state, count in queued.items():
            for _ in range(count):
                found = self.waits.take(state)
                if found is None:
                    break
                waiter, listener = found
                try:
                    grant = self.hand_off(tx, waiter.ask)
                except BaseException:
                    self.waits.give_back(waiter, listener)
                    raise
                if grant is None:
                    self.waits.give_back(waiter, listener)
                    break  # what the longest waiting cannot take, it is woken for
                taken.append((waiter, listener, grant))
                left[state] -= 1
        return +left

    def _committed(self, taken: list[Taken], queued: Counter[str] | None) -> None:
        """After the commit: answer the claims handed a grant, then wake for the rest."""
        for waiter, listener, grant in taken:
            self.waits.hand(waiter, listener, grant)
        if queued is None or queued:
            self.waits.queued(queued)

    def _give_back(self, taken: list[Taken]) -> None:
        """The write rolled back: the claims it took wait on (or claim again, if woken)."""
        while taken:
            waiter, listener, _ = taken.pop()
            self.waits.give_back(waiter, listener)
