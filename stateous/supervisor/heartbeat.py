"""The heartbeat: renew the leases of the tasks held, and try again within the lease.

A task is held while its routine runs and then until its report lands: a report that
waits in the outbox behind a cut connection must not find its lease ended. A heartbeat
goes every quarter of the shortest lease of the tasks held. One that
fails (no connection, no answer in time, a bad answer, a refusal that says "later" or
any 5xx) is tried again after the outbox's back-off, but never later than an eighth
of that lease after the last try began, and each try waits for its answer an eighth
of the lease (a second at least): so a few cut heartbeats in a row never let the
lease of a supervisor that is alive run out. The log says so once when heartbeats
start failing, and once when one gets through again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from stateous.client.http import Refused, Unreachable
from stateous.model.limits import LEASE
from stateous.model.wire import Grant
from stateous.supervisor.answers import BadAnswer, BoundedConnection, read_lost
from stateous.supervisor.held import TOOK_BACK, Running
from stateous.supervisor.refusals import TRY_AGAIN, backoff
from stateous.supervisor.workers import Workers

log = logging.getLogger("stateous.supervisor")

#: The shortest time between two heartbeats, in seconds, whatever the leases say.
HEARTBEAT_FLOOR = 0.25
#: The shortest wait for the answer to a heartbeat, in seconds.
ANSWER_FLOOR = 1.0


class Heart:
    """The heartbeat loop of one supervisor, over its running tasks."""

    def __init__(
        self,
        name: str,
        running: dict[int, Running],
        connect: Callable[[], BoundedConnection],
        lose: Callable[[int, str, int], object],
        reporting: Callable[[], dict[int, int]],
        workers: Workers,
    ) -> None:
        self.name = name
        self.running = running
        #: The tasks whose report waits in the outbox.
        self.reporting = reporting
        #: The lease of the last grant, for tasks held after their routine ended.
        self.last_lease = float(LEASE)
        self.connect = connect
        self.lose = lose
        self.workers = workers
        #: Set to ask for a heartbeat now (a new task runs, a report found its task not held).
        self.asked = asyncio.Event()
        #: Heartbeats that failed since the last one that got through.
        self.failures = 0
        self._said = ""

    def holds(self, grant: Grant) -> None:
        """A new task runs: keep its lease in mind and renew it now."""
        self.last_lease = grant.lease
        self.asked.set()

    def _lease(self) -> float:
        return min((item.grant.lease for item in self.running.values()), default=self.last_lease)

    def held(self) -> dict[int, int]:
        """The tasks to renew, with their attempts: those that run here and those whose
        report waits."""
        return self.reporting() | {task: item.grant.attempt for task, item in self.running.items()}

    def interval(self) -> float:
        """A quarter of the shortest lease of the running tasks, and never below the floor."""
        return max(self._lease() / 4, HEARTBEAT_FLOOR)

    def retry_wait(self) -> float:
        """The back-off after the failures so far, at most an eighth of the shortest lease."""
        return max(min(backoff(self.failures - 1), self._lease() / 8), HEARTBEAT_FLOOR)

    async def loop(self) -> None:
        connection = self.connect()
        last = -HEARTBEAT_FLOOR
        wait = self.interval()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.asked.wait(), max(wait, 0))
            self.asked.clear()
            if not (tasks := self.held()):
                wait = self.interval()
                continue
            # However often a beat is asked for (each claim asks for one), they are
            # never closer than the floor.
            await asyncio.sleep(last + HEARTBEAT_FLOOR - time.monotonic())
            last = time.monotonic()
            if await self.beat(connection, tasks):
                wait = self.interval()
            else:
                wait = last + self.retry_wait() - time.monotonic()

    async def beat(self, connection: BoundedConnection, tasks: dict[int, int]) -> bool:
        """Send one heartbeat for these tasks (and attempts); False when it must be tried
        again soon."""
        body = {"supervisor": self.name, "tasks": sorted(tasks)}
        answer_within = max(self._lease() / 8, ANSWER_FLOOR)
        if connection.timeout != answer_within:
            connection.close()
            connection.timeout = answer_within
        try:
            lost = await self.workers.run(
                connection.ask, "POST", "/tasks/heartbeat", body, read_lost
            )
        except Unreachable as ex:
            return self._failed(f"a heartbeat failed: {ex}")
        except BadAnswer as ex:
            return self._failed(str(ex))
        except Refused as ex:
            if ex.code in TRY_AGAIN or ex.status >= 500:
                refused = f"the control plane refused a heartbeat ({ex.code}): {ex.message}"
                return self._failed(refused)
            log.warning("the control plane refused a heartbeat: %s", ex.message)
            return True
        if self.failures:
            log.info(
                "a heartbeat reached the control plane again; %d before it failed", self.failures
            )
        self.failures, self._said = 0, ""
        for task in lost:
            # Only the attempt this beat was for: by its answer a new one may run here.
            if task in tasks:
                self.lose(task, TOOK_BACK, tasks[task])
        return True

    def _failed(self, reason: str) -> bool:
        """Count a failed heartbeat; say why, unless the last line said the same."""
        self.failures += 1
        if reason != self._said:
            self._said = reason
            log.warning("%s; trying again in %gs", reason, self.retry_wait())
        return False
