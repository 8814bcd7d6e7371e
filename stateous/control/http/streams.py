"""Live streams of ledger entries: `GET /stream`, as server-sent events.

An open stream holds no request thread. The API checks the request and asks for a
place (`Streams.open`, refused beyond `limit` with `too_many_streams`); the HTTP
server hands the connection's socket over (`Handover`, `stream_sockets.Outlet`), and one
thread, `stateous-streams`, writes to every open stream from then on, polling their
sockets. It wakes when a write commits (`serve.Published`, after the commit, as
`waiting_claims.Waking` wakes the claims), at most every `GATHER` seconds reads the ledger
once for every stream that is caught up, only up to the
store's horizon (`store/positions.py`: no entry still uncommitted below it), and
sends each stream the entries it asked for. Each beat of the clock asks again
whether each stream's caller may still read (`recheck`): a stream whose credential
was revoked, or one opened without a credential before authentication was turned
on, ends at the thread's next round. Each event's id is the entry's global
position, so a client that reconnects with `Last-Event-ID` gets every entry after
it once. A comment every `HEARTBEAT` seconds keeps proxies from closing an idle
stream, and `close` ends every stream when the control plane stops. Nothing here
speaks HTTP or reaches a driver: the server gives an `Outlet`, the store the rows.
docs/design.md says why.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import msgspec

from stateous.control.errors import InvalidArgument, NotServing, TooManyStreams
from stateous.control.http.stream_sockets import Outlet, Poller
from stateous.control.store import Entry, Store, Tx, to_iso

log = logging.getLogger("stateous.control.stream")

#: Seconds between the comments that keep an idle stream open through proxies.
HEARTBEAT = 15.0
#: The most ledger rows read at once.
PAGE = 500
#: Seconds between two reads of the ledger at most: one read serves the commits of that
#: time, so a busy control plane reads once per GATHER, not once per commit.
GATHER = 0.02
#: Seconds before a read that the database refused is tried again.
RETRY = 1.0
#: A comment line: ignored by clients, seen by proxies.
PING = b": keep-alive\n\n"
#: The headers of a stream's answer: no cache may keep it, and no proxy may hold its
#: entries back to fill a buffer (`X-Accel-Buffering` is nginx's, also heeded by others).
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

_encode = msgspec.json.Encoder().encode


def event(pos: int, entry: Entry) -> bytes:
    """One entry as a server-sent event: its position as the id, its kind as the event."""
    data = _encode(
        {
            "token": entry.token,
            "seq": entry.seq,
            "at": to_iso(entry.at),
            "kind": entry.kind,
            "data": entry.data,
        }
    )
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (pos, entry.kind.encode(), data)


class Watcher:
    """One open stream: the token it follows (None: all), and the position after which it
    wants entries: the last it has had while it catches up; once current, it has had
    every entry up to the cursor, and `last` is no longer moved. `caller` names the
    credential it was opened with (None: none)."""

    __slots__ = ("caller", "last", "left", "outlet", "token")

    def __init__(
        self, token: str | None, last: int, outlet: Outlet, caller: str | None = None
    ) -> None:
        self.token = token
        self.last = last
        self.outlet = outlet
        self.caller = caller
        self.left = False


class Handover:
    """The body of a stream's answer. When the server that serves it adopts the connection
    (`hooks.Hooks.adopt`, asked once the answer has started), the connection passes to the
    streams' thread and the body itself is empty; under a server that cannot, the stream
    ends at once."""

    def __init__(
        self,
        streams: Streams,
        token: str | None,
        last: int,
        adopt: Callable[[], Outlet | None],
        caller: str | None = None,
    ) -> None:
        self.streams = streams
        self.token = token
        self.last = last
        self.adopt = adopt
        self.caller = caller
        self.placed = True

    def __iter__(self) -> Iterator[bytes]:
        try:
            outlet = self.adopt()
        except BaseException:
            self.close()
            raise
        if outlet is not None:
            self.placed = False
            self.streams.join(Watcher(self.token, self.last, outlet, self.caller))
        return iter(())

    def close(self) -> None:
        """Give the place back if no stream took it."""
        if self.placed:
            self.placed = False
            self.streams.leave()


class Streams:
    """Every open stream, at most `limit`, and the one thread that writes to them."""

    def __init__(self, store: Store, limit: int, heartbeat: float = HEARTBEAT) -> None:
        self.store = store
        self.limit = limit
        self.heartbeat = heartbeat
        self._lock = threading.Lock()
        #: The streams' sockets and the pipe that wakes their thread, made with the thread.
        self._poller: Poller | None = None
        self._places = 0
        self._joining: list[Watcher] = []
        self._woken = False
        self._closed = False
        #: Set when a stream's client left or could not take what was sent.
        self._leaving = False
        #: Streams that have had every entry up to the cursor, by token (None: all tokens).
        self._current: dict[str | None, list[Watcher]] = {}
        #: Streams still reading what came before the cursor.
        self._behind: list[Watcher] = []
        #: Every stream the thread serves, by its outlet.
        self._by_outlet: dict[Outlet, Watcher] = {}
        #: The position up to which the current streams have had every entry (set by the
        #: thread when the first stream joins).
        self._cursor = 0
        #: Started with the first stream, so an app that serves none has no thread for them.
        self._thread: threading.Thread | None = None
        #: Whether a stream's caller may still read, given by the clock for the next round.
        self._keeps: Callable[[str | None], bool] | None = None

    # the request threads' side

    def open(
        self,
        token: str | None,
        last: int | None,
        adopt: Callable[[], Outlet | None],
        caller: str | None = None,
    ) -> Handover:
        """Take a place for a stream of `token` (None: all) after position `last` (None:
        a token's first entry, or the next entry of all), for the credential `caller`."""
        with self._lock:
            if self._closed:
                raise NotServing("the control plane is stopping")
            if self._places >= self.limit:
                raise TooManyStreams(
                    f"{self.limit} streams are open, the most this control plane serves; "
                    "try again later"
                )
            self._places += 1
        if last is None:
            last = 0 if token is not None else self.store.horizon()
        return Handover(self, token, last, adopt, caller)

    def leave(self) -> None:
        with self._lock:
            self._places -= 1

    def join(self, watcher: Watcher) -> None:
        with self._lock:
            if self._closed:
                watcher.outlet.end()
                self._places -= 1
                return
            self._joining.append(watcher)
            if self._thread is None:
                self._poller = Poller()
                self._thread = threading.Thread(
                    target=self._run, args=(self._poller,), name="stateous-streams", daemon=True
                )
                self._thread.start()
        self.wake()

    def recheck(self, keeps: Callable[[str | None], bool]) -> None:
        """End, at the thread's next round, every stream whose caller `keeps` refuses."""
        with self._lock:
            self._keeps = keeps
        self.wake()

    def committed(self) -> None:
        """A write has committed: wake the thread if a stream may have entries to get."""
        if self._places and self.store.horizon() > self._cursor:
            self.wake()

    def wake(self) -> None:
        if self._woken:
            return  # the thread has not read since it was woken: it reads this too
        with self._lock:
            if self._woken or self._poller is None:
                return
            self._woken = True
            self._poller.wake()

    def close(self) -> None:
        """End every stream, and open no more: the control plane stops."""
        with self._lock:
            self._closed = True
            thread, poller = self._thread, self._poller
        if thread is not None and poller is not None:
            poller.wake()
            thread.join(timeout=5)

    # the streams' thread

    def _run(self, poller: Poller) -> None:
        beat = time.monotonic() + self.heartbeat
        next_round = 0.0
        while True:
            for outlet in poller.wait(beat - time.monotonic()):
                self._by_outlet[outlet].left = self._leaving = True
            time.sleep(max(0.0, next_round - time.monotonic()))
            next_round = time.monotonic() + GATHER
            with self._lock:
                if self._closed:
                    break
                self._woken = False
                joining, self._joining = self._joining, []
                keeps, self._keeps = self._keeps, None
            for watcher in joining:
                self._by_outlet[watcher.outlet] = watcher
                poller.add(watcher.outlet)
            self._admit(joining)
            if keeps is not None:
                self._end_refused(keeps)
            try:
                self._round()
            except Exception as ex:  # the database could not be read now: again soon
                log.warning("the streams could not read the ledger (%s); trying again", ex)
                beat = min(beat, time.monotonic() + RETRY)
            self._drop_left()
            if time.monotonic() >= beat:
                self._each(lambda watcher: self._sent(watcher, PING))
                beat = time.monotonic() + self.heartbeat
        with self._lock:
            ending = [*self._watchers(), *self._joining]
            self._places = 0
        for watcher in ending:
            poller.remove(watcher.outlet)
            watcher.outlet.end()
        poller.close()

    def _end_refused(self, keeps: Callable[[str | None], bool]) -> None:
        """Mark the streams whose caller may no longer read as left, before any more is sent."""
        for watcher in self._watchers():
            if not watcher.left and not keeps(watcher.caller):
                why = f"{watcher.caller!r} is revoked" if watcher.caller else "auth is now on"
                log.info("a stream ends: the credential %s", why)
                watcher.left = self._leaving = True

    def _watchers(self) -> Iterator[Watcher]:
        for group in self._current.values():
            yield from group
        yield from self._behind

    def _each(self, send: Callable[[Watcher], bool]) -> None:
        """Send to every stream; a stream that cannot take it is dropped."""
        for watcher in list(self._watchers()):
            if not watcher.left and not send(watcher):
                watcher.left = self._leaving = True
        self._drop_left()

    def _drop_left(self) -> None:
        """Forget the streams whose client has left (or was too slow), and end them."""
        if not self._leaving:
            return
        self._leaving = False
        gone = [watcher for watcher in self._watchers() if watcher.left]
        for token, group in list(self._current.items()):
            kept = [watcher for watcher in group if not watcher.left]
            if kept:
                self._current[token] = kept
            else:
                del self._current[token]
        self._behind = [watcher for watcher in self._behind if not watcher.left]
        for watcher in gone:
            self._let_go(watcher)
        with self._lock:
            self._places -= len(gone)

    def _let_go(self, watcher: Watcher) -> None:
        del self._by_outlet[watcher.outlet]
        assert self._poller is not None
        self._poller.remove(watcher.outlet)
        watcher.outlet.end()

    def _sent(self, watcher: Watcher, data: bytes) -> bool:
        """Send to one stream; poll its socket for writing while what was sent waits."""
        if not watcher.outlet.send(data):
            return False
        assert self._poller is not None
        self._poller.watch(watcher.outlet)
        return True

    def _admit(self, joining: list[Watcher]) -> None:
        """New streams catch up first unless they start at the cursor or after it."""
        if not any(self._current.values()):
            self._cursor = self.store.horizon()
        for watcher in joining:
            if watcher.last >= self._cursor:
                self._current.setdefault(watcher.token, []).append(watcher)
            else:
                self._behind.append(watcher)

    def _read(self, after: int, upto: int, token: str | None) -> list[tuple[int, Entry]]:
        def operation(tx: Tx) -> list[tuple[int, Entry]]:
            return tx.entries_since(after, upto, token, PAGE)

        return self.store.read(operation)

    def _round(self) -> None:
        """Bring the streams behind a page nearer the cursor, then every current stream
        up to the horizon."""
        for watcher in list(self._behind):
            rows = self._read(watcher.last, self._cursor, watcher.token)
            upto = rows[-1][0] if len(rows) == PAGE else self._cursor
            self._deliver({watcher.token: [watcher]}, rows)
            watcher.last = max(watcher.last, upto)
            if watcher.last >= self._cursor and not watcher.left:
                self._behind.remove(watcher)
                self._current.setdefault(watcher.token, []).append(watcher)
        if self._behind:
            self.wake()
        horizon = self.store.horizon()
        while self._cursor < horizon and any(self._current.values()):
            rows = self._read(self._cursor, horizon, None)
            # A current stream's own last position is passed by every row read here.
            self._deliver(self._current, rows)
            self._cursor = rows[-1][0] if len(rows) == PAGE else horizon
        if not any(self._current.values()):
            self._cursor = max(self._cursor, horizon)

    def _deliver(
        self, groups: dict[str | None, list[Watcher]], rows: list[tuple[int, Entry]]
    ) -> None:
        """Send each stream of `groups` the rows it follows and has not had."""
        out: dict[Watcher, list[bytes]] = {}
        everyone = groups.get(None, [])
        for pos, entry in rows:
            followers = groups.get(entry.token, [])
            if not followers and not everyone:
                continue
            data = event(pos, entry)
            for watcher in (*followers, *everyone):
                if pos > watcher.last:
                    out.setdefault(watcher, []).append(data)
        for watcher, events in out.items():
            if not watcher.left and not self._sent(watcher, b"".join(events)):
                watcher.left = self._leaving = True


def last_event_id(raw: str | None) -> int | None:
    """The position a client resumes after, from its `Last-Event-ID`; None when absent."""
    if raw is None or raw == "":
        return None
    if raw.isascii() and raw.isdigit() and len(raw) <= 18:
        return int(raw)
    raise InvalidArgument(f"Last-Event-ID must be an event id of this stream, not {raw!r}")
