"""The HTTP server of the control plane: how waitress reads requests and holds connections.

Waitress reads and parses every connection on one loop thread and answers on a few
request threads. Its settings are chosen here on purpose, and three small subclasses
(its request parser, its error task and its channel, set through the `parser_class`,
`error_task_class` and `channel_class` attributes it reads them from) close what they
leave open:

- framing that could be read two ways (`Content-Length` beside `Transfer-Encoding`, or
  `Transfer-Encoding` on HTTP/1.0) is refused and the connection closed, so no bytes
  after it can run as a request of their own;
- a body over `BODY_LIMIT` is refused from its `Content-Length`, before it is read; a
  chunked body as soon as it passes the limit;
- every answer that waitress writes itself is `{"error", "code"}` JSON;
- `Expect: 100-continue` on a request that is already whole does not stop its answer;
- a client that leaves more than `UNREAD_LIMIT` bytes of answers unread gets no request
  thread until it reads, and loses its connection after the channel timeout; a request
  must arrive whole within the channel timeout too;
- answers waiting to be sent stay in memory, never in a temporary file; a connection
  whose client stopped reading is closed when it keeps too much unsent (`unsent`);
- after a refusal the connection reads on, dropping what the client still sends, for
  `LINGER` seconds before it closes, so that the client reads the refusal, not a reset;
- a live stream (`GET /stream`) gives its request thread back and leaves the loop: its
  socket, with the answer's headers to send, goes to the streams' thread (`Task.adopt`,
  `stream_sockets.Outlet`), which writes to it from then on;
- a claim that waits for a task gives its request thread back and leaves the loop for
  the waiting room (`Task.park`, `parked_claims.WaitingRoom`), which sends it back to be
  served again once it is woken or its wait ends;
- on SQLite, a request that may write, with a small body, is served by the loop itself,
  not handed to a request thread: the writes of one turn of the loop share a unit of work
  of the store, which commits before the loop's next look at the sockets, and their
  answers await it (`loop_writes.LoopTurns`, `Channel.awaiting_commit`); while another
  write of the process holds the database, the turn is put off, not waited for. Reads, and
  writes whose cost grows with a large body, stay on the request threads, so that they
  hold no other connection.

Nothing here knows a route; `app.create_app` is the app served.
"""

from __future__ import annotations

import copy
import io
import logging
import resource
import socket
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import msgspec
from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher, WSGITask
from waitress.utilities import (
    RequestEntityTooLarge,
    RequestHeaderFieldsTooLarge,
    ServerNotImplemented,
)

from stateous.control.defaults import (
    DEFAULT_CHANNEL_TIMEOUT,
    DEFAULT_CONNECTION_LIMIT,
    DEFAULT_STREAMS,
    DEFAULT_THREADS,
)
from stateous.control.http.hooks import Environ
from stateous.control.http.loop_writes import LoopTurns, Request
from stateous.control.http.parked_claims import WaitingRoom
from stateous.control.http.refusals import FAILED
from stateous.control.http.stream_sockets import Outlet
from stateous.control.http.unsent import STALL, close_over_bounds, send_buffer_full
from stateous.control.store import Store
from stateous.control.waiting_claims import Waiter
from stateous.model.codes import RefusalCode
from stateous.model.durations import parse_duration
from stateous.model.limits import BODY_LIMIT, REQUEST_HEAD_LIMIT, UNREAD_LIMIT
from stateous.model.text import printable
from stateous.model.wire import ErrorBody

#: How long a connection reads on (and drops what it reads) after a refusal, in seconds.
LINGER = 2.0
#: How often the loop looks for connections past their time, in seconds.
SWEEP = 1
#: A size never reached: no request thread waits for a client to read (waiting is what
#: parking is for), and no unsent answer spills to a file, out of sight of `unsent`'s bounds.
NEVER = 2**62

_encode = msgspec.json.Encoder().encode
log = logging.getLogger("stateous.control.edge")


@dataclass(frozen=True, slots=True)
class Limits:
    """What the server gives its clients: request threads, open connections, and the seconds
    a connection may stay idle, wait unread, or take to send one request."""

    threads: int = DEFAULT_THREADS
    connection_limit: int = DEFAULT_CONNECTION_LIMIT
    channel_timeout: int = parse_duration(DEFAULT_CHANNEL_TIMEOUT)
    #: Live streams open at once.
    streams: int = DEFAULT_STREAMS


DEFAULT_LIMITS = Limits()


def settings(limits: Limits, listener: socket.socket) -> Adjustments:
    """Waitress's adjustments for `limits`, serving on `listener`."""
    return Adjustments(
        sockets=[listener],
        threads=limits.threads,
        connection_limit=limits.connection_limit,
        channel_timeout=limits.channel_timeout,
        cleanup_interval=SWEEP,
        max_request_header_size=REQUEST_HEAD_LIMIT,
        # Waitress refuses a body of this many bytes or more: MAX_BODY itself is allowed.
        max_request_body_size=BODY_LIMIT + 1,
        outbuf_high_watermark=NEVER,
        outbuf_overflow=NEVER,
        # select() cannot watch a descriptor past 1023; poll() can.
        asyncore_use_poll=True,
        ident="stateous",
    )


class Parser(HTTPRequestParser):  # type: ignore[misc]  # waitress ships no types
    """Waitress's request parser, refusing ambiguous framing and needless 100 Continues."""

    #: The waiter of a claim served again after its wait, and the body it was sent with.
    waiter: Waiter | None = None
    kept_body = b""

    def __init__(self, adj: Adjustments) -> None:
        super().__init__(adj)
        self.began = time.time()

    def parse_header(self, header_plus: bytes) -> None:
        super().parse_header(header_plus)
        if self.chunked and "CONTENT_LENGTH" in self.headers:
            raise ParsingError(
                "it has both Content-Length and Transfer-Encoding, "
                "which could each say where it ends"
            )
        if self.version != "1.1" and "TRANSFER_ENCODING" in self.headers:
            raise ParsingError(
                f"Transfer-Encoding is an HTTP/1.1 header, and this is HTTP/{self.version}"
            )

    def received(self, data: bytes) -> int:
        consumed = int(super().received(data))
        if self.completed:
            # Whole (or refused) already: a 100 Continue would stop it from being answered.
            self.expect_continue = False
        return consumed


def refusal(request: HTTPRequestParser) -> tuple[int, str, RefusalCode]:
    """The status, sentence and code of a request that waitress will not hand to the app.

    No 5xx but a real failure: waitress's 501 for an unknown Transfer-Encoding is the
    client's framing, so a 400.
    """
    error = request.error
    if isinstance(error, RequestHeaderFieldsTooLarge):
        sentence = f"the request's line and headers pass {REQUEST_HEAD_LIMIT} bytes"
        return 431, sentence, RefusalCode.BAD_REQUEST
    if isinstance(error, RequestEntityTooLarge):
        if request.chunked:
            sentence = f"the chunked body passes {BODY_LIMIT} bytes, the most"
            return 413, sentence, RefusalCode.BAD_REQUEST
        sentence = f"the body has {request.content_length} bytes; the most is {BODY_LIMIT}"
        return 413, sentence, RefusalCode.BAD_REQUEST
    if isinstance(error, ServerNotImplemented):
        sentence = "the request cannot be read: chunked is the only Transfer-Encoding taken"
        return 400, sentence, RefusalCode.BAD_REQUEST
    if error.code < 500:
        # Waitress's own words, such as "Invalid chunk size" or "Content-Length is invalid".
        reason = str(error.body)
        if reason[1:2].islower():
            reason = reason[0].lower() + reason[1:]
        return error.code, f"the request cannot be read: {reason}", RefusalCode.BAD_REQUEST
    return 500, FAILED, RefusalCode.UNEXPECTED


class Refusal(ErrorTask):  # type: ignore[misc]  # waitress ships no types
    """Waitress's error answer, written as ours: `{"error", "code"}` with a documented code."""

    def execute(self) -> None:
        status, sentence, code = refusal(self.request)
        body = _encode(ErrorBody(error=sentence, code=code))
        self.status = f"{status} {HTTPStatus(status).phrase}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.channel.linger = True
        self.write(body)


class Task(WSGITask):  # type: ignore[misc]  # waitress ships no types
    """Waitress's WSGI task, able to hand its connection over to a live stream, or to the
    waiting room while its claim waits."""

    #: Its claim waits in the waiting room: the task ends without answering.
    parked = False

    def get_environment(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environment()
        environ[TASK] = self
        request = self.request
        if request.waiter is not None:
            environ["wsgi.input"] = io.BytesIO(request.kept_body)
        return environ

    def park(self, waiter: Waiter) -> bool:
        """Keep this claim in the waiting room until `waiter` is woken or its wait ends, then
        serve it again; False when the connection has more to do first (the app answers)."""
        channel = self.channel
        with channel.requests_lock:
            if not channel.connected or channel.request is not None or len(channel.requests) > 1:
                return False
            again = copy.copy(self.request)
            if again.waiter is None:
                body = self.request.get_body_stream()
                body.seek(0)
                again.kept_body = body.read()
            again.body_rcv = None
            again.waiter = waiter
            channel.waiting = again
        self.parked = True
        return True

    def finish(self) -> None:
        if self.parked:
            return
        super().finish()
        if self.request.waiter is not None:
            # A claim served again leaves the waits, whatever answered it: a refusal before
            # the claim itself (its credential revoked while it waited) would keep its place.
            self.request.waiter.leave()

    def adopt(self) -> Outlet:
        """Give the connection's socket to a live stream, with the answer's headers (and
        `Connection: close`) to send first; the loop lets go of it at its next turn, and
        this task ends without ending the answer."""
        self.set_close_on_finish()
        head = self.build_response_header()
        self.wrote_header = True
        channel = self.channel
        with channel.outbuf_lock:
            # What an earlier answer on this connection left unsent goes first.
            unsent = b"".join(bytes(buf.get(len(buf), True)) for buf in channel.outbufs)
            channel.total_outbufs_len = 0
        outlet = Outlet(channel.socket, self.chunked_response, unsent + head)
        # The outlet frames and ends the answer, and the socket outlives this task.
        self.chunked_response: bool = False
        self.close_on_finish = False
        with channel.requests_lock:
            for later in channel.requests[1:]:
                later.close()
            del channel.requests[1:]
        channel.handed_over = True
        return outlet


#: The environ key of the task that serves a request, read by `ServerHooks` only.
TASK = "stateous.task"


class ServerHooks:
    """What this server does for a request beyond WSGI (`hooks.Hooks`), by the task that
    serves it; a request that no task of this server serves gets nothing beyond WSGI."""

    def adopt(self, environ: Environ) -> Outlet | None:
        task: Task | None = environ.get(TASK)
        return None if task is None else task.adopt()

    def park(self, environ: Environ, waiter: Waiter) -> bool:
        task: Task | None = environ.get(TASK)
        return task is not None and task.park(waiter)

    def resumed(self, environ: Environ) -> Waiter | None:
        task: Task | None = environ.get(TASK)
        return None if task is None else task.request.waiter


#: The hooks that the app served by this server is made with (`app.create_app`).
SERVER_HOOKS = ServerHooks()


class Channel(HTTPChannel):  # type: ignore[misc]  # waitress ships no types
    """One connection: parks when its client stops reading, lingers after a refusal."""

    parser_class = Parser
    error_task_class = Refusal
    task_class = Task
    #: Set once a live stream took the socket over: the loop lets go of it.
    handed_over = False
    #: Its next request waits for the client to read (no request thread works for it).
    parked = False
    #: Set by a refusal: read on for LINGER seconds before closing.
    linger = False
    #: When lingering ends (0 while not lingering).
    lingering_until = 0.0
    #: A request thread works for it now, and writes its answers itself.
    serving = False
    #: The claim that waits, to serve again: the loop hands the connection to the waiting
    #: room at its next turn, once what it has to send is sent.
    waiting: Parser | None = None
    #: The loop answered a request that may have written: its answer waits for the turn's
    #: commit before it is sent.
    awaiting_commit = False

    def next_request(self) -> Request | None:
        """The request to serve next, if any. Asked by the loop as it queues the connection,
        often under `requests_lock`, when no request thread serves it."""
        return self.requests[0] if self.requests else None

    def _flush_some(self, do_close: bool = True) -> bool:
        if self.awaiting_commit:
            return False
        return bool(super()._flush_some(do_close))

    def service(self) -> None:
        with self.outbuf_lock:
            self.parked = self.connected and self.total_outbufs_len > UNREAD_LIMIT
        if self.parked:
            self.server.pull_trigger()
            return
        self.serving = True
        try:
            super().service()
        finally:
            # Waitress pulls the loop's trigger after a service: what is left is sent then.
            self.serving = False
        if self.handed_over or self.waiting is not None:
            # Waitress pulled the trigger while this was still serving: the loop lets go
            # of a connection that leaves it (a stream's, a waiting claim's) at a new turn.
            self.server.pull_trigger()

    def handle_write(self) -> None:
        super().handle_write()
        if self.parked:
            with self.outbuf_lock:
                if self.connected and self.total_outbufs_len <= UNREAD_LIMIT:
                    self.parked = False
                    self.server.add_task(self)

    def readable(self) -> bool:
        if self.waiting is not None:
            return False  # what its client sends next is read after the claim's answer
        return bool(self.lingering_until) or bool(super().readable())

    def received(self, data: bytes) -> bool:
        if self.handed_over:
            return True  # a stream's client has nothing more to ask
        return bool(super().received(data))

    def writable(self) -> bool:
        if self.handed_over and not self.serving:
            self.let_go()
            return False
        if self.waiting is not None and not self.serving and not self.total_outbufs_len:
            self.to_waiting_room()
            return False
        # While a request thread writes, the loop would only spin on the socket's lock.
        return not self.lingering_until and not self.serving and bool(super().writable())

    def let_go(self) -> None:
        """Leave the loop without closing the socket, which a live stream now owns (called
        by the loop, which asks each connection whether it is writable at each turn)."""
        self.server.active_channels.pop(self._fileno, None)
        self.del_channel()
        self.connected = False

    def to_waiting_room(self) -> None:
        """Leave the loop while the claim waits, keeping the socket (called by the loop)."""
        self.server.active_channels.pop(self._fileno, None)
        self.del_channel()
        self.server.waiting_room.seat(self)

    @property
    def waiter(self) -> Waiter:
        assert self.waiting is not None and self.waiting.waiter is not None
        return self.waiting.waiter

    def resume(self) -> None:
        """Come back from the waiting room and serve the claim again (called by the loop)."""
        again, self.waiting = self.waiting, None
        assert again is not None
        self._fileno = self.socket.fileno()
        self.add_channel()
        self.last_activity = time.time()
        with self.requests_lock:
            self.requests.append(again)
        self.server.add_task(self)

    def handle_read(self) -> None:
        if not self.lingering_until:
            super().handle_read()
            return
        try:
            data = self.socket.recv(self.adj.recv_bytes)
        except OSError:
            data = b""
        if not data:
            self.close_now()

    def handle_close(self) -> None:
        if self.linger and not self.lingering_until and self.connected:
            try:
                self.socket.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            else:
                self.lingering_until = time.time() + LINGER
                return
        self.close_now()

    def close_now(self) -> None:
        """Close the connection at once, dropping what it holds."""
        super().handle_close()

    def stalled(self, now: float) -> bool:
        """Whether this connection holds answers that its client has taken no byte of for
        `STALL` seconds (waitress marks each send, and the end of each answer, as activity)
        and whose socket takes no more now; one that a request thread serves, or that
        lingers to close, is never counted."""
        return (
            bool(self.total_outbufs_len)
            and not self.serving
            and not self.lingering_until
            and now - self.last_activity > STALL
            and send_buffer_full(self.socket.fileno())
        )

    def overdue(self, now: float) -> bool:
        """Whether this connection holds the server past its time; no request thread works
        for it in any of these cases, so closing it from the loop is safe."""
        if self.lingering_until:
            return now >= self.lingering_until
        timeout: int = self.adj.channel_timeout
        if self.parked:
            return now - self.last_activity > timeout
        request = self.request
        return request is not None and not self.requests and now - request.began > timeout


class Server(TcpWSGIServer):  # type: ignore[misc]  # waitress ships no types
    """Waitress's server with our channel, closing connections that overstay, the waiting
    room of its claims that wait, and writes served by its loop in turns."""

    channel_class = Channel

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting_room = WaitingRoom(self.trigger.pull_trigger)
        #: The writes the loop serves itself, once it has a store of one writer.
        self.turns: LoopTurns | None = None
        #: The thread of the writes too heavy for the loop (`loop_writes.heavy`).
        self.beside: Draining | None = None
        self.loop_thread: int | None = None
        self.stopped = False

    def serve_writes(self, store: Store) -> None:
        """Serve the requests that may write from the loop, in turns of `store`, but the
        heavy ones on a thread of their own."""
        self.beside = Draining()
        self.beside.set_thread_count(1)
        self.turns = LoopTurns(
            store, super().add_task, self.beside.add_task, self.trigger.pull_trigger
        )

    def drain(self) -> None:
        """Answer the heavy writes already read, then end their thread (once stopped)."""
        if self.beside is not None:
            self.beside.shutdown()

    def run(self) -> None:
        """Serve until `stop`: each turn, wait for the sockets and serve what they bring,
        then the writes that the loop serves itself, committed before the next turn."""
        self.loop_thread = threading.get_ident()
        try:
            while self._map and not self.stopped:
                wasyncore.poll2(self.adj.asyncore_loop_timeout, self._map)
                if self.turns is not None:
                    self.turns.serve()
        finally:
            if self.turns is not None:
                self.turns.serve(last=True)  # a turn put off is served before the loop ends
            self.loop_thread = None

    def stop(self) -> None:
        """Make `run` return after the turn under way (from any thread)."""
        self.stopped = True
        self.pull_trigger()

    def pull_trigger(self) -> None:
        # The loop asks every connection what it waits for before it polls again, so it
        # need not wake itself; and its pipe, which only the loop drains, would fill.
        if threading.get_ident() != self.loop_thread:
            super().pull_trigger()

    def add_task(self, task: Any) -> None:
        turns = self.turns
        if turns is None or threading.get_ident() != self.loop_thread or not turns.take(task):
            super().add_task(task)

    def close(self) -> None:
        self.waiting_room.close()
        super().close()

    def maintenance(self, now: float) -> None:
        super().maintenance(now)
        for channel in list(self.active_channels.values()):
            if channel.overdue(now):
                channel.close_now()
        close_over_bounds(self.active_channels.values(), now)


class Draining(ThreadedTaskDispatcher):  # type: ignore[misc]  # waitress ships no types
    """Request threads that, when the server stops, first answer the requests already read.

    Waitress would drop them (and log that it did), leaving their clients without
    an answer to a request that the server had taken.
    """

    def shutdown(self, cancel_pending: bool = True, timeout: float = 5) -> bool:
        deadline = time.monotonic() + timeout
        while self.queue and time.monotonic() < deadline:
            time.sleep(0.01)
        return bool(super().shutdown(cancel_pending, max(0.0, deadline - time.monotonic())))


class Printable(logging.Filter):
    """Escape the control characters of a log line, which may carry a request's path."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        escaped = printable(message)
        if escaped != message:
            record.msg, record.args = escaped, None
        return True


_printable = Printable()


def create_server(
    app: Any,
    limits: Limits,
    listener: socket.socket,
    *,
    map: dict[int, Any] | None = None,
    dispatcher: ThreadedTaskDispatcher | None = None,
) -> Server:
    """Serve the WSGI `app` on a bound, listening socket, within `limits`."""
    adj = settings(limits, listener)
    if dispatcher is None:
        dispatcher = ThreadedTaskDispatcher()
        dispatcher.set_thread_count(limits.threads)
    logging.getLogger("waitress").addFilter(_printable)
    return Server(
        app,
        {} if map is None else map,
        _sock=listener,
        dispatcher=dispatcher,
        adj=adj,
        bind_socket=False,
        sockinfo=(listener.family, listener.type, listener.proto, listener.getsockname()),
    )


def open_files_short(limits: Limits) -> int:
    """Raise this process's open-file limit to what `limits` may need, as far as the system
    allows; answer how many descriptors are still missing (0 when none)."""
    # A connection holds its socket, in the loop or, while its claim waits, in the waiting
    # room (which holds as many again); the rest serve the database, the log and the listener.
    needed = 2 * limits.connection_limit + limits.streams + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return 0
    ceiling = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
    resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
    return max(0, needed - ceiling)
