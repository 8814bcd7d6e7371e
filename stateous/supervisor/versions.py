"""Which of a folder's states still match the graph that the control plane serves.

A running supervisor reads `/health` every few seconds. When its checksum changes, it
reads the new graph and compares it, state by state, with the graph it started on (whose
checksum is contract.py's): a state matches when it still exists with the same context
model, the same events and the same payload models. It claims only the states that
match, says so in one log line, and serves them all again when the contract's own graph
comes back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from stateous.client.http import NotServing, Refused, Unreachable
from stateous.model import contracts
from stateous.model.graph_file import GraphFile, checksum
from stateous.supervisor.answers import BadAnswer, BoundedConnection, read_graph, read_health

log = logging.getLogger("stateous.supervisor")

#: Seconds between two reads of /health by a running supervisor.
WATCH_EVERY = 3.0


def still_matching(built_for: GraphFile, served: GraphFile, states: Iterable[str]) -> list[str]:
    """The states, sorted, whose routines fit the served graph as they fit `built_for`."""
    return sorted(state for state in states if contracts.same(built_for, served, state))


class Watch:
    """The states that a supervisor claims now, kept up to date from `/health`."""

    def __init__(
        self, states: Iterable[str], contract: str, connect: Callable[[], BoundedConnection]
    ) -> None:
        self.written = frozenset(states)
        self.contract = contract
        self.connect = connect
        #: The graph of contract.py, as the control plane served it at start.
        self.built_for: GraphFile | None = None
        self.seen = contract
        self.serving = sorted(self.written)

    async def _ask(self, connection: BoundedConnection, path: str, read: Any) -> Any:
        return await asyncio.to_thread(connection.ask, "GET", path, None, read)

    async def start(self) -> bool:
        """Read the graph of contract.py from the control plane; False when it serves
        another one now. A graph that cannot be read now (a credential refused, say: the
        claims say why) is read when the control plane serves it again."""
        connection = self.connect()
        try:
            graph = await self._ask(connection, "/workflow", read_graph)
        except (Unreachable, NotServing, Refused, BadAnswer):
            return True
        finally:
            connection.close()
        self.built_for = graph
        return checksum(graph) == self.contract

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
                except (Unreachable, NotServing, Refused, BadAnswer):
                    continue  # the claims and the heartbeat say so already
                self.changed(graph)
        finally:
            connection.abort()

    def changed(self, graph: GraphFile) -> None:
        """Serve the states that match `graph`, and say so in one line."""
        self.seen = checksum(graph)
        if self.seen == self.contract:
            self.built_for = graph
        if self.seen == self.contract or self.built_for is None:
            self.serving = sorted(self.written)
            log.info(
                "the control plane serves the workflow of contract.py again (%s); serving %s",
                self.seen,
                ", ".join(self.serving),
            )
            return
        self.serving = still_matching(self.built_for, graph, self.written)
        dropped = sorted(self.written - set(self.serving))
        log.warning(
            "the control plane serves another version of the workflow (%s); still matching: "
            "%s; not served until contract.py matches again: %s",
            self.seen,
            ", ".join(self.serving) or "none",
            ", ".join(dropped) or "none",
        )
