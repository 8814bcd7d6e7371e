"""The writes that the server's loop serves itself, in turns (on a store of one writer).

After each look at the sockets, the loop serves the requests that may write (any method
but GET, HEAD and OPTIONS) inside one unit of work of the store (`with store.turn()`):
their writes share its transaction, one sync for them all and no hand-off to a request
thread, and leaving the block commits them; their answers are held until then
(`Channel.awaiting_commit`), and so is a read pipelined behind one of them, which goes to a request
thread once the commit has made what it follows visible. When the commit fails, those
connections are closed with no answer. The loop never waits for another write of its own
process: while one holds the database, its turn is put off until that one has passed it on,
and the sockets are served meanwhile. A write whose body passes `LOOP_BODY` bytes goes
to a thread of its own beside the loop instead, where it has a transaction of its own: its
cost grows with its body, and the loop must not hold every other socket meanwhile; nor
must such writes take every request thread from the reads. So does a write to a plan
(`BESIDE_LOOP`), which acts on up to 10,000 tokens, one write each.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from stateous.control.errors import DatabaseBusy
from stateous.control.store import Store, Turn

#: The methods that only read: their requests go to the request threads.
READS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The largest body, in bytes, of a write that the loop serves itself.
LOOP_BODY = 2048
#: The paths of the writes whose cost grows with the tokens they act on, not their body.
BESIDE_LOOP = "/plans"
#: How often the last turn looks again for the database, in seconds, should a wake be missed.
AGAIN = 0.1

log = logging.getLogger("stateous.control.edge")


class Request(Protocol):
    """A request as waitress's parser reads it."""

    error: Any
    command: str | None
    path: str
    body_bytes_received: int


def writes(request: Request) -> bool:
    """Whether `request` may write. One that cannot be read (no method) gets waitress's
    refusal from a request thread."""
    return request.error is None and request.command not in READS


def heavy(request: Request) -> bool:
    """Whether the cost of a write grows with its body or with the tokens it acts on."""
    return request.body_bytes_received > LOOP_BODY or request.path.startswith(BESIDE_LOOP)


def waited(turn: Turn) -> bool:
    """Begin `turn`, waiting for as long as other writes of this process hold the database."""
    free = threading.Event()
    while not turn.begin(free.set):
        free.wait(AGAIN)
        free.clear()
    return True


class LoopChannel(Protocol):
    """A connection as the loop's turns see it (`server.Channel`)."""

    #: Its answer waits for the turn's commit.
    awaiting_commit: bool
    #: The claim that waits, if any (`server.Channel.waiting`).
    waiting: Any

    @property
    def waiter(self) -> Any: ...
    def next_request(self) -> Request | None: ...
    def service(self) -> None: ...
    def close_now(self) -> None: ...


class LoopTurns:
    """The requests the loop serves in its turns over `store`; `hand_off` gives a connection
    to the request threads, `beside` to the thread of the heavy writes."""

    def __init__(
        self,
        store: Store,
        hand_off: Callable[[Any], None],
        beside: Callable[[Any], None],
        wake: Callable[[], None],
    ) -> None:
        self.store = store
        self.hand_off = hand_off
        self.beside = beside
        #: Wakes the loop from another thread: the database is free for a turn put off.
        self.wake = wake
        #: The connections whose requests the loop serves at the end of this turn.
        self.writing: list[LoopChannel] = []
        #: Connections awaiting the commit whose next request reads: it goes to a request
        #: thread after the commit, so that it sees what the request before it wrote.
        self.after_turn: list[LoopChannel] = []

    def take(self, channel: LoopChannel) -> bool:
        """Keep `channel` for this turn, when its request is the loop's to serve or must wait
        for the turn's commit, or give it to the thread of the heavy writes; False when it
        goes to a request thread now."""
        request = channel.next_request()
        if request is not None and writes(request):
            if heavy(request):
                self.beside(channel)
            else:
                self.writing.append(channel)
        elif channel.awaiting_commit:
            self.after_turn.append(channel)
        else:
            return False
        return True

    def serve(self, *, last: bool = False) -> None:
        """Serve the requests kept (and those that follow them on their connections, which
        serving keeps again) in one turn of the store, then let their answers go. While
        another write of this process holds the database (a heavy write, a checkpoint),
        put the turn off: the requests stay kept, and `wake` is called once the database
        is free; the loop meanwhile serves every other socket. The `last` turn, as the
        loop stops, waits for the database instead: its requests were read, and are
        answered."""
        if not self.writing:
            return
        awaiting: list[LoopChannel] = []
        committed = False
        try:
            with self.store.turn() as turn:
                if not (waited(turn) if last else turn.begin(self.wake)):
                    return
                while self.writing:
                    channel = self.writing.pop(0)
                    channel.awaiting_commit = True
                    awaiting.append(channel)
                    self.serve_one(channel)
            committed = True
        except DatabaseBusy as ex:
            log.error("the writes of a turn of the loop are not kept: %s", ex)
        finally:
            self.release(awaiting, committed)

    @staticmethod
    def serve_one(channel: LoopChannel) -> None:
        try:
            channel.service()
        except Exception:
            # As waitress's request threads do: one request's failure ends its connection,
            # not the server.
            log.exception("serving a request on the loop failed")
            channel.close_now()

    def release(self, awaiting: list[LoopChannel], committed: bool) -> None:
        """Let the turn's answers go and hand the reads that waited to the request threads;
        when the commit failed, close their connections instead: no answer says the
        change is on disk."""
        reads, self.after_turn = self.after_turn, []
        for channel in awaiting:
            channel.awaiting_commit = False
            if not committed:
                if channel.waiting is not None:
                    channel.waiter.leave()  # its claim never got to wait
                channel.close_now()
        if committed:
            for channel in reads:
                self.hand_off(channel)
