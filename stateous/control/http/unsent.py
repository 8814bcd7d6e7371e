"""The bounds on answers that clients leave unread: what the HTTP server may keep unsent.

The server (`server.Server`) keeps every answer waiting to be sent in memory, never in a
temporary file, so these bounds see all of it. They count only what waits on a client that
stopped reading: one that keeps reading gets an answer of any size, as fast as it reads.
"""

from __future__ import annotations

import logging
import select
from collections.abc import Iterable
from typing import Any, Protocol

from stateous.model.limits import CONNECTION_UNSENT_LIMIT, TOTAL_UNSENT_LIMIT

#: How long a client may take no byte of its answers before it counts as not reading, in
#: seconds: a client that reads takes some at every round trip.
STALL = 1.0

log = logging.getLogger("stateous.control.edge")


def send_buffer_full(fileno: int) -> bool:
    """Whether the kernel takes no more bytes for this socket now: its client has left its
    buffers full. A client that reads drains them, so its socket stays writable even when
    the loop, slowed down, has not sent for a while; that alone is no sign of a stall."""
    poller = select.poll()
    poller.register(fileno, select.POLLOUT)
    return not poller.poll(0)


class Connection(Protocol):
    """A connection of the server, as the bounds see it."""

    total_outbufs_len: int
    addr: Any

    def stalled(self, now: float) -> bool: ...
    def close_now(self) -> None: ...


def over_bounds(connections: Iterable[Connection], now: float) -> list[Connection]:
    """The connections to close: of those whose clients stopped reading, each holding more
    than `CONNECTION_UNSENT_LIMIT`, then, largest first, as many as it takes to bring what all
    connections hold under `TOTAL_UNSENT_LIMIT`."""
    holding = [connection for connection in connections if connection.total_outbufs_len]
    total = sum(connection.total_outbufs_len for connection in holding)
    stalled = sorted(
        (connection for connection in holding if connection.stalled(now)),
        key=lambda connection: connection.total_outbufs_len,
        reverse=True,
    )
    chosen = []
    for connection in stalled:
        unsent = connection.total_outbufs_len
        if unsent <= CONNECTION_UNSENT_LIMIT and total <= TOTAL_UNSENT_LIMIT:
            break
        chosen.append(connection)
        total -= unsent
    return chosen


def close_over_bounds(connections: Iterable[Connection], now: float) -> None:
    """Close the connections past the bounds, with a log line each (its client's address
    and byte counts: nothing from a request)."""
    connections = list(connections)
    total = sum(connection.total_outbufs_len for connection in connections)
    for connection in over_bounds(connections, now):
        log.warning(
            "closed a connection from %s: it left %d bytes of answers unread for %g s, "
            "with %d held in all (the most: %d a connection, %d in all)",
            connection.addr[0],
            connection.total_outbufs_len,
            STALL,
            total,
            CONNECTION_UNSENT_LIMIT,
            TOTAL_UNSENT_LIMIT,
        )
        connection.close_now()
