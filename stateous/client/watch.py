"""`Client.watch`: follow a live stream of ledger entries (`GET /stream`) over cuts.

The control plane sends each entry as a server-sent event whose id is the entry's
place in the ledger's global order. A cut connection (or a control plane that
restarts) is opened again with `Last-Event-ID`, the last id received, so the
entries come on where they stopped, none lost and none twice. A stream of one
token ends after that token's ending entry (completed, failed or cancelled).
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from stateous.client.http import Connection, Refused, Unreachable
from stateous.model.codes import RefusalCode
from stateous.model.vocabulary import Kind

#: The kinds of entry that end a token.
ENDING = frozenset({Kind.COMPLETED, Kind.FAILED, Kind.CANCELLED})
#: The pause before the first reconnect, and the longest, in seconds.
PAUSES = (0.25, 5.0)
#: How long a read may wait: the control plane sends a comment every 15 s.
QUIET = 45.0
#: Refusals after which the stream is opened again: nothing is wrong with the request.
PASSING = frozenset(
    {RefusalCode.DATABASE_BUSY, RefusalCode.NOT_SERVING, RefusalCode.TOO_MANY_STREAMS}
)


def events(response: http.client.HTTPResponse) -> Iterator[tuple[int | None, str]]:
    """The events of a server-sent event stream: (id or None, data); comments are skipped."""
    ident: int | None = None
    data: list[str] = []
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield ident, "\n".join(data)
            ident, data = None, []
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "id" and value.isdigit():
            ident = int(value)


def watch(
    connection: Connection,
    token: str | None,
    after: int | None,
    retry_for: float,
) -> Iterator[dict[str, Any]]:
    """Yield entries of `token` (None: all) after the id `after`, opening the stream again
    after each cut; give up (raise) when it cannot be opened for `retry_for` seconds."""
    path = "/stream" if token is None else f"/stream?token={quote(token, safe='')}"
    last = after
    pause = PAUSES[0]
    cut_at: float | None = None
    while True:
        headers = {} if last is None else {"Last-Event-ID": str(last)}
        try:
            response = connection.open_stream(path, headers, max(connection.timeout, QUIET))
        except (Unreachable, Refused) as ex:
            passing = isinstance(ex, Unreachable) or ex.code in PASSING
            cut_at = time.monotonic() if cut_at is None else cut_at
            if not passing or time.monotonic() - cut_at > retry_for:
                raise
            time.sleep(pause)
            pause = min(pause * 2, PAUSES[1])
            continue
        cut_at, pause = None, PAUSES[0]
        try:
            for ident, data in events(response):
                entry = json.loads(data)
                if ident is not None:
                    last = ident
                yield entry
                if token is not None and entry.get("kind") in ENDING:
                    return
        except (OSError, http.client.HTTPException):
            pass  # cut: open it again after the last id received
        finally:
            response.close()
