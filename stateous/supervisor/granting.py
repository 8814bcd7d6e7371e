"""How the supervisor asks for tasks: by a claim, or by the report of a task that ends,
which asks for the next one (`next`) and is answered with its grant (eager dispatch).

The control plane keeps the request id of each grant (a claim row per request id, 0025),
which an ask sent again with the same id gets again while the supervisor holds the task
(after a lost answer). So every ask has an id of its own, and several are in flight at
once: each report asks `next` under a new id, side by side with the others and with a
claim. An id whose answer was never read is owed (`Asking`): a report whose answer was
lost, then refused as landed already, leaves its id to the next claim, which sends it and
gets the grant the lost answer carried.

A task that ends passes its slot to its report (`Slots.pass_on`): the report asks `next`
only with that slot, and the task granted in its answer runs in it; with no grant, the
slot is free again. A report the outbox kept from an earlier run carries no slot and asks
nothing. While a task runs or reports here, the next ask is likely its report's, so the
claim loop lets its claims wait on the control plane only while nothing does; while one
does, it claims after a pause, or when a report frees a slot.
"""

from __future__ import annotations

import asyncio
import random
import secrets
from typing import Any

from stateous.model.wire import Grant
from stateous.supervisor.answers import BadAnswer
from stateous.supervisor.folder import Routines

#: Seconds between claims when the last one found nothing at once (at most; jittered).
IDLE = 1.0


async def idle(stop: asyncio.Event, nudge: asyncio.Event, most: float | None) -> None:
    """Wait up to `most` seconds (a second when None) before the next claim, jittered, so
    that supervisors turned away together do not come back together; less when a
    report may have queued work (`nudge`), or at a stop."""
    waits = [asyncio.create_task(stop.wait()), asyncio.create_task(nudge.wait())]
    most = IDLE if most is None else most
    pause = random.uniform(most / 2, most)
    await asyncio.wait(waits, timeout=pause, return_when=asyncio.FIRST_COMPLETED)
    for waiting in waits:
        waiting.cancel()


def new_request() -> str:
    """A new request id: 32 random hex digits (as a UUID's hex, at a third of its cost)."""
    return secrets.token_hex(16)


class Asking:
    """The request ids of the asks for a task (claims, and reports with `next`), each its
    own, and those owed: sent, their answer never read."""

    def __init__(self, labels: dict[str, str] | None = None) -> None:
        #: The ids whose answer was lost: each claim sends the oldest again, until read.
        self.owed: list[str] = []
        #: The supervisor's labels, which every ask sends (`labels:` in stateous.yaml).
        self.labels = labels or {}

    def claiming(self) -> str:
        """The request id of a claim: the oldest owed, else a new one."""
        return self.owed[0] if self.owed else new_request()

    def next(self, states: list[str], checksum: str, request: str) -> dict[str, Any]:
        """The fields of an ask under `request` (labels only when set, so an older control
        plane takes it); a report's `next`, or a claim's but its name and wait."""
        asked: dict[str, Any] = {"states": states, "checksum": checksum, "request": request}
        if self.labels:
            asked["labels"] = self.labels
        return asked

    def answered(self, request: str) -> None:
        """An answer to `request` was read (or could never be): it is owed no more."""
        if request in self.owed:
            self.owed.remove(request)

    def lost(self, request: str) -> None:
        """The answer to `request` was never read: the next claim sends it again."""
        if request not in self.owed:
            self.owed.append(request)


class Slots:
    """Which reports carry the slot of the task they report on, to ask `next` with it."""

    def __init__(self, on: bool) -> None:
        #: Whether the supervisor asks `next` at all (`eager:` in stateous.yaml).
        self.on = on
        #: The tasks whose job ended with their report carrying their slot.
        self._passed: set[int] = set()
        #: The (task, attempt) of each report that carries a slot until its answer.
        self._carried: set[tuple[int, int]] = set()

    def pass_on(self, grant: Grant) -> None:
        """Give the slot of a task that ends to its report, kept next."""
        self._passed.add(grant.task)
        self._carried.add((grant.task, grant.attempt))

    def ended(self, task: int) -> bool:
        """The job of `task` ended: whether its slot went to its report (else it is free)."""
        if task in self._passed:
            self._passed.discard(task)
            return True
        return False

    def forget(self, task: int, attempt: int) -> None:
        """The attempt was lost before its report was sent: the report is dropped, and
        the slot is freed when the job ends, as without a report."""
        self._passed.discard(task)
        self._carried.discard((task, attempt))

    def carries(self, task: int, attempt: int) -> bool:
        """Whether the report of this attempt carries its task's slot."""
        return (task, attempt) in self._carried

    def take(self, task: int, attempt: int) -> None:
        """The report's answer came, or it will not be sent: its slot is its sender's now."""
        self._carried.discard((task, attempt))

    @property
    def reporting(self) -> bool:
        """Whether a report carries a slot: an ask is coming."""
        return bool(self._carried)


#: The request that claims, as a bad answer to it names it.
CLAIM = "POST /tasks/claim"


def reporting(task: int) -> str:
    """The request that reports on `task`, as a bad answer to it names it."""
    return f"POST /tasks/{task}/report"


def usable(
    grant: Grant, routines: Routines, running: dict[int, Any], name: str, request: str
) -> Grant:
    """The grant, if it is for a state served here and a task that does not run here."""
    if grant.state not in routines.by_state:
        raise BadAnswer(
            f"it grants task {grant.task} of {grant.state!r}, a state that {name} does not serve",
            request,
        )
    if grant.task in running:
        raise BadAnswer(f"it grants task {grant.task}, which runs here already", request)
    return grant
