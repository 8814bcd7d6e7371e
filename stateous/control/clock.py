"""The clock: about once a second, renew the tenure, end leases that are over, fire timers
(a `retry` timer queues its task's next attempt).

It runs in a thread of its own. A tick that fails is logged in one line and tried
again on the next beat; a lost tenure stops the clock and tells the server.

A tick finds its work through two partial indexes, never by reading the live
tokens: the leases that are over by `tasks_lease` (`lease_until WHERE status =
'claimed'`) and the timers that are due by `timers_due` (`due_at, id WHERE status =
'pending'`), both read up to `BATCH` rows in one snapshot, each timer's token by its
key. Each lease ended and each timer fired is then a transaction of its own, which
checks again that it is still due. While a round finds a full batch, the tick takes
another, for up to `KEEP_UP` seconds, so a backlog of timers is worked off in due
order, a lease that ends meanwhile is found by the next round, and no other token's
timeout waits a second per hundred timers before it. With nothing due, a tick is two
index lookups that find nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial

from stateous.control.engine import Engine
from stateous.control.errors import DatabaseBusy, OutcomeUnknown
from stateous.control.moves import Arrival, Unrouted
from stateous.control.store import Counter, TenureLost, Tx
from stateous.control.tenure import Tenure
from stateous.model.durations import in_words
from stateous.model.names import TIMEOUT_EVENT
from stateous.model.vocabulary import Kind, TaskStatus, TimerKind, TimerStatus, TokenStatus

log = logging.getLogger("stateous.control.clock")

#: The most leases ended, and the most timers fired, in one round of a tick.
BATCH = 100
#: How long a tick goes on taking rounds while each finds a full batch, in seconds: a
#: backlog is worked off at the database's pace, not `BATCH` a second.
KEEP_UP = 0.5


def renew_leases(engine: Engine) -> int:
    """Give every claimed task a lease of full length from now (no ledger row: for the
    supervisors nothing happened); answer how many were renewed."""
    return engine.store.write(lambda tx: tx.renew_leases(tx.now + engine.lease))


def due_work(engine: Engine, limit: int = BATCH) -> tuple[list[int], list[int]]:
    """The tasks whose lease is over and the timers that are due, from one snapshot."""
    return engine.store.read(lambda tx: (tx.expired_leases(limit), tx.due_timers(limit)))


def end_lease(engine: Engine, tx: Tx, ident: int) -> bool:
    """End the lease of a task if it is still over: its attempt failed; tell whether it was."""
    task = tx.task(ident)
    if (
        engine.leases_owed  # a heartbeat failed on the database since the tick began
        or task is None
        or task.status != TaskStatus.CLAIMED
        or (task.lease_until or 0) > tx.now
    ):
        return False
    token = engine.token_row(tx, task.token)
    reason = f"{task.claimed_by} stopped answering: no heartbeat for {in_words(engine.lease)}"
    tx.count(Counter.LEASES_ENDED)
    engine.moves.fail_attempt(tx, task, token, reason)
    return True


def fire_timer(engine: Engine, tx: Tx, ident: int) -> bool:
    """Fire a timer if it is still pending, due, and of its token's current visit; tell
    whether it fired."""
    timer = tx.timer(ident)
    if timer is None or timer.status != TimerStatus.PENDING or timer.due_at > tx.now:
        return False
    token = engine.token_row(tx, timer.token)
    if token.status != TokenStatus.ACTIVE or (token.state, token.visit) != (
        timer.state,
        timer.visit,
    ):
        return False
    tx.set_timer_status(ident, TimerStatus.FIRED)
    tx.record(token.token, Kind.TIMER_FIRED, {"timer": ident, "event": timer.event})
    if timer.kind == TimerKind.RETRY:
        task = tx.live_task(token.token)
        if task is not None and task.status == TaskStatus.WAITING:
            engine.moves.requeue(tx, token, task)
    elif timer.kind == TimerKind.TIMEOUT:
        engine.moves.route(tx, token, Arrival(TIMEOUT_EVENT), Unrouted.FAIL)
    else:
        engine.moves.route(tx, token, Arrival(timer.event, timer.payload), Unrouted.REJECT)
    return True


def one_round(engine: Engine) -> tuple[int, int, bool]:
    """End the leases that are over and fire the due timers, up to `BATCH` of each, each in
    its own transaction; answer how many ended and fired, and whether a batch was full."""
    leases, timers = due_work(engine)
    ended = sum(engine.store.write(partial(end_lease, engine, ident=i)) for i in leases)
    fired = sum(engine.store.write(partial(fire_timer, engine, ident=i)) for i in timers)
    return ended, fired, max(len(leases), len(timers)) >= BATCH


def tick(engine: Engine) -> tuple[int, int]:
    """One beat of the clock: renew the leases owed after an outage of the database, then
    take rounds of leases that are over and due timers (each round reads both afresh, in
    due order across all tokens) until a round finds less than a full batch or the tick
    has run `KEEP_UP` seconds; answer how many leases ended and how many timers fired."""
    began = time.monotonic()
    ended = fired = 0
    try:
        if engine.leases_owed:
            engine.leases_owed = False
            renewed = renew_leases(engine)
            if renewed:
                log.info("the database answers again: %d claimed tasks get a full lease", renewed)
        more = True
        while more:
            leases, timers, more = one_round(engine)
            ended, fired = ended + leases, fired + timers
            more = more and time.monotonic() - began < KEEP_UP
    except (DatabaseBusy, OutcomeUnknown):
        engine.leases_owed = True
        raise
    return ended, fired


class Clock(threading.Thread):
    """Beats every `interval` seconds until stopped."""

    def __init__(
        self,
        engine: Engine,
        tenure: Tenure,
        on_lost: Callable[[TenureLost], None],
        interval: float = 1.0,
        also: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name="stateous-clock", daemon=True)
        self.engine = engine
        self.tenure = tenure
        self.on_lost = on_lost
        self.interval = interval
        #: What else runs at each beat, after the tick (the API's credentials, looked at again).
        self.also = also
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.interval):
            try:
                self.tenure.renew()
            except TenureLost as ex:
                self.on_lost(ex)
                return
            except (DatabaseBusy, OutcomeUnknown) as ex:
                # The database did not answer: no lease may end for this silence.
                self.engine.leases_owed = True
                self._failed(ex)
                continue
            except Exception as ex:
                self._failed(ex)
                continue
            try:
                tick(self.engine)
                if self.also is not None:
                    self.also()
            except Exception as ex:
                self._failed(ex)

    def _failed(self, ex: Exception) -> None:
        log.warning(
            "the clock's tick failed (%s); it tries again in %.1f seconds", ex, self.interval
        )

    def stop(self) -> None:
        self._stopped.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
