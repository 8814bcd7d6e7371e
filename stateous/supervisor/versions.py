"""Which of a folder's states match the graph that the control plane serves.

A supervisor claims every state whose routine is written, naming the graph it was built
for (contract.py's checksum), so that the control plane grants it only the tasks whose
state has the same contract there: the tasks of its own version, and those of any other
version whose state did not change. It may start while the control plane serves another
version, as long as the control plane keeps the graph of contract.py (older tokens run
it). At start, and whenever `/health` shows another checksum, it compares the served
graph with its own, state by state (a state matches when it exists with the same context
model, the same events and the same payload models) and says in one log line which
states the new tokens' tasks still match; the others serve the tokens of its version.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from stateous.client.http import NotServing, Refused, Unreachable
from stateous.model import contracts
from stateous.model.codes import RefusalCode
from stateous.model.graph_file import GraphFile, checksum
from stateous.model.invocation import invoked_as
from stateous.supervisor.answers import BadAnswer, BoundedConnection, read_graph, read_health
from stateous.supervisor.folder import FolderError
from stateous.supervisor.workers import Workers

log = logging.getLogger("stateous.supervisor")

#: Seconds between two reads of /health by a running supervisor.
WATCH_EVERY = 3.0
#: What a failed read of the control plane is: its claims and heartbeat say so already.
UNREAD = (Unreachable, NotServing, Refused, BadAnswer)


def still_matching(built_for: GraphFile, served: GraphFile, states: Iterable[str]) -> list[str]:
    """The states, sorted, whose routines fit the served graph as they fit `built_for`."""
    return sorted(state for state in states if contracts.same(built_for, served, state))


def unkept(folder: Path, contract: str, served: str) -> FolderError:
    """The refusal to start on a contract.py whose graph the control plane neither serves
    nor keeps."""
    return FolderError(
        f"{folder / 'contract.py'} is for another version of the workflow ({contract}, a graph "
        f"the control plane does not keep; it serves {served}): "
        f"run `{invoked_as()} init supervisor --refresh {shlex.quote(str(folder))}`"
    )


class Watch:
    """The graph a supervisor was built for, and which of its states match the served one."""

    def __init__(
        self,
        states: Iterable[str],
        contract: str,
        connect: Callable[[], BoundedConnection],
        workers: Workers,
    ) -> None:
        #: Every state whose routine is written, sorted: what the claims list.
        self.written = sorted(states)
        self.contract = contract
        self.connect = connect
        self.workers = workers
        #: The graph of contract.py, as the control plane keeps it.
        self.built_for: GraphFile | None = None
        #: The checksum of the graph served when last read.
        self.seen = contract

    async def _ask(self, connection: BoundedConnection, path: str, read: Any) -> Any:
        return await self.workers.run(connection.ask, "GET", path, None, read)

    async def _own(self, connection: BoundedConnection) -> GraphFile | None:
        """The graph of contract.py as the control plane keeps it; None when it keeps none
        (a control plane that knows no `?checksum=` answers the one it serves)."""
        path = f"/workflow?checksum={quote(self.contract, safe='')}"
        try:
            graph: GraphFile = await self._ask(connection, path, read_graph)
        except Refused as ex:
            if ex.code == RefusalCode.GRAPH_NOT_FOUND:
                return None
            raise
        return graph if checksum(graph) == self.contract else None

    async def start(self, served: str) -> bool:
        """Read the graph of contract.py, and the served one when it is another; False when
        the control plane serves another graph and does not keep this one. A graph that
        cannot be read now (a credential refused, say: the claims say why) is read when the
        served graph next changes."""
        self.seen = served
        connection = self.connect()
        try:
            self.built_for = await self._own(connection)
            if served == self.contract or self.built_for is None:
                return served == self.contract
            self.changed(await self._ask(connection, "/workflow", read_graph))
        except UNREAD:
            return served == self.contract
        finally:
            connection.close()
        return True

    async def loop(self) -> None:
        """Read /health on a cadence; on a new checksum, read the graph and compare it. When
        the stop cancels it, a request in flight is cut, so that no thread of it outlives the
        supervisor (the process waits for its threads before it exits)."""
        connection = self.connect()
        try:
            while True:
                await asyncio.sleep(WATCH_EVERY)
                try:
                    health = await self._ask(connection, "/health", read_health)
                    if health.checksum == self.seen:
                        continue
                    graph = await self._ask(connection, "/workflow", read_graph)
                    if self.built_for is None:
                        self.built_for = await self._own(connection)
                except UNREAD:
                    continue
                self.changed(graph)
        finally:
            connection.abort()

    def changed(self, graph: GraphFile) -> None:
        """Say in one line which states the new tokens' tasks still match in `graph`."""
        self.seen = checksum(graph)
        if self.seen == self.contract:
            log.info(
                "the control plane serves the workflow of contract.py again (%s); "
                "every state matches: %s",
                self.seen,
                ", ".join(self.written),
            )
            return
        if self.built_for is None:
            log.warning(
                "the control plane serves another version of the workflow (%s); the graph of "
                "contract.py cannot be read to compare them",
                self.seen,
            )
            return
        matching = still_matching(self.built_for, graph, self.written)
        own = [state for state in self.written if state not in matching]
        log.warning(
            "the control plane serves another version of the workflow (%s); still matching, "
            "for its new tokens too: %s; for the tokens of contract.py's version only: %s",
            self.seen,
            ", ".join(matching) or "none",
            ", ".join(own) or "none",
        )
