"""`stateous serve`: the control plane as a process, following the Serve card.

The port is bound before the database opens, so a port in use costs nothing. The
database (SQLite or Postgres, by its URL) is held (a lock that lives with the process
and the `control_plane` row), the graph file kept beside the older ones that live tokens
still run on, then the clock and the HTTP server start. SIGINT or SIGTERM finishes the
requests in progress, gives its tenure up and stops. A standby
(`--standby`) whose database another control plane holds answers `not_serving`
on its port and asks for the lock four times a second; it serves once it has it.
"""

from __future__ import annotations

import io
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TextIO, TypeVar
from urllib.parse import urlsplit, urlunsplit

from waitress import wasyncore

from stateous.control import resources, schedules
from stateous.control.clock import Clock, renew_leases
from stateous.control.defaults import DEFAULT_DB, DEFAULT_LISTEN
from stateous.control.engine import Engine
from stateous.control.errors import NotServing
from stateous.control.graph import Graph
from stateous.control.http.access import Access, served_hosts, served_origins
from stateous.control.http.access import proxy_site as proxy_site  # for the command line
from stateous.control.http.app import Guard, create_app, create_standby_app
from stateous.control.http.server import (
    DEFAULT_LIMITS,
    SERVER_HOOKS,
    Draining,
    Server,
    create_server,
    open_files_short,
)
from stateous.control.http.server import (
    Limits as Limits,  # for the command line
)
from stateous.control.http.streams import Streams
from stateous.control.offset_clock import serving_clock
from stateous.control.retention import Retention
from stateous.control.store import (
    POSTGRES,
    GraphVersion,
    Lock,
    Store,
    TenureLost,
    TenureRefused,
    Tx,
    UnknownUrl,
    joined,
    open_locked,
    serving_lock,
    sqlite_path,
)
from stateous.control.store.contract import PassingStore
from stateous.control.tenure import Tenure
from stateous.control.versions import Graphs
from stateous.control.waiting_claims import Waits
from stateous.model.errors import Failure
from stateous.model.heap import freeze_start_up

log = logging.getLogger("stateous.control.serve")

Result = TypeVar("Result")

#: Connections to Postgres beside one per request thread: one for the clock, one spare.
SPARE_CONNECTIONS = 2
#: How often a standby asks for the serving lock, in seconds.
STANDBY_EVERY = 0.25
#: How often the main thread looks for a stop signal while the loop serves, in seconds.
SIGNAL_CHECK = 0.25
NO_AUTH = "authentication is off (--no-auth): whoever reaches this port can do anything"
TOOK_OVER = "took over the database: the control plane that served it is gone"


class ServeError(Failure):
    """`serve` cannot start; the message says why in one sentence."""


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Address:
        host, _, port = text.rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ServeError(f"--listen takes HOST:PORT, e.g. {DEFAULT_LISTEN}, not {text!r}")
        return cls(host, int(port))

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def url(self, port: int) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}"


def check_url(url: str) -> None:
    """Refuse a `--db` that names no database this version serves, before the port is bound."""
    if url.startswith(POSTGRES):
        return
    try:
        sqlite_path(url)
    except UnknownUrl:
        raise ServeError(
            f"--db takes a URL such as {DEFAULT_DB} or postgresql://USER@HOST:5432/NAME, "
            f"not {url!r}"
        ) from None


def without_password(url: str) -> str:
    """The database's URL as a message may show it: without the password it may hold."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    hosts = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}@{hosts}"))


def bind(address: Address) -> socket.socket:
    """Bind and listen on the address, or say why not."""
    try:
        infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)
    except socket.gaierror as ex:
        raise ServeError(f"cannot listen on {address.host}: {ex.strerror}") from None
    family, kind, proto, _, sockaddr = infos[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(sockaddr)
        listener.listen(1024)
    except OSError as ex:
        listener.close()
        reason = "the port is in use" if ex.errno == 98 else (ex.strerror or str(ex))
        raise ServeError(f"cannot listen on {address.host}:{address.port}: {reason}") from None
    return listener


def record_graph(store: Store, graphs: Graphs) -> list[GraphVersion]:
    """Keep the graph file served, and answer the older versions that live tokens still run.

    Live tokens of a graph that the database does not keep (started before version 0015
    kept files) go on by the served graph when its structure is the one on record, as
    before; otherwise the start is refused, since their graph cannot be read.
    """
    graph = graphs.served

    def operation(tx: Tx) -> list[GraphVersion]:
        row = tx.control()
        same = row is None or row.structure in (None, graph.structure)
        for checksum, live in tx.live_unkept():
            if not same:
                raise ServeError(
                    f"refusing to serve: {live} token(s) are active or paused on a graph file "
                    f"of another structure that this database does not keep ({checksum}); "
                    "serve that graph file once, so that it is kept, or cancel them"
                )
            tx.repin(checksum, graph.checksum)
        graphs.record(tx)
        versions = tx.graph_versions()
        return [v for v in versions if v.live and v.checksum != graph.checksum]

    return store.write(operation)


def versions_line(graph: Graph, older: list[GraphVersion]) -> str:
    """The start line that names the older versions live tokens still run on."""
    listed = ", ".join(f"{version.checksum} ({version.live} live token(s))" for version in older)
    return f"older versions still in use: {listed}; new tokens start on {graph.checksum}"


class Published(PassingStore):
    """A store whose writes, once committed (or kept and refused), wake the live streams: the
    door from the engine's writes to `http/streams.py`."""

    def __init__(self, store: Store, streams: Streams) -> None:
        super().__init__(store)
        self.streams = streams

    def write(self, operation: Callable[[Tx], Result]) -> Result:
        try:
            return self.store.write(operation)
        finally:
            joined().after(self.streams.committed)


class ControlPlane:
    """One running control plane: its socket, store, tenure, clock and HTTP server.

    A `standby` whose database another control plane serves binds its port, answers
    `not_serving` and asks for the serving lock every `STANDBY_EVERY` seconds; once it
    has it, it opens the database and serves as any control plane.
    """

    def __init__(
        self,
        graph_path: str,
        db: str,
        listen: str,
        lease: float,
        err: TextIO | io.TextIOBase = sys.stderr,
        *,
        no_auth: bool = False,
        allowed_hosts: tuple[str, ...] = (),
        limits: Limits = DEFAULT_LIMITS,
        standby: bool = False,
        keep_ended: float | None = None,
    ) -> None:
        self.err = err
        #: How long an ended token tree is kept, in seconds; None keeps it for ever.
        self.keep_ended = keep_ended
        self.db = db
        self.lease = lease
        self.no_auth = no_auth
        self.allowed_hosts = allowed_hosts
        self.limits = limits
        self.address = Address.parse(listen)
        try:
            self.graph = Graph.load(graph_path)
        except ValueError as ex:
            raise ServeError(str(ex)) from None
        check_url(db)
        self.listener = bind(self.address)
        self.lost: TenureLost | None = None
        #: The claims that wait for a task; a stop signal ends them first.
        self.waits = Waits(limits.connection_limit)
        #: The live streams, once the database is open; a stop signal ends them too.
        self.streams: Streams | None = None
        #: Why a standby that took the database could not serve it.
        self.failed: Exception | None = None
        #: The serving lock while a standby waits for it; None once it is held.
        self.waiting: Lock | None = None
        try:
            lock = serving_lock(db)
            try:
                lock.take()
            except TenureRefused:
                if not standby:
                    raise
                self.waiting = lock
            else:
                self._open(lock)
        except BaseException:
            self.listener.close()
            raise

    def _open(self, lock: Lock) -> None:
        """Open the database under its serving lock, check it, hold it and make the clock."""
        self.lock = lock
        self.store = open_locked(
            self.db,
            lock,
            connections=self.limits.threads + SPARE_CONNECTIONS,
            clock=serving_clock(),
        )
        try:
            streams = Streams(self.store, self.limits.streams)
            published = Published(self.store, streams)
            self.engine = Engine(self.graph, published, lease=self.lease, waits=self.waits)
            exposed = not self.address.is_loopback or bool(self.allowed_hosts)
            self.access = Access(self.store, enabled=not self.no_auth, exposed=exposed)
            self._check_open_to_others()
            self.older = record_graph(self.store, self.engine.graphs)
            schedules.sync(self.engine, self.graph.document)
            self.store.write(lambda tx: resources.declare(tx, self.graph.document.resources))
            self.tenure = Tenure(self.store, self.lock)
            self.tenure.take(self.graph.structure, self.graph.checksum)
        except BaseException:
            self._close_opened()
            raise
        self.streams = streams
        # Leases do not end for the time no control plane served (docs/concepts/reliability.md).
        renewed = renew_leases(self.engine)
        if renewed:
            log.info("%d claimed tasks get a full lease from this start", renewed)
        self.clock = Clock(self.engine, self.tenure, self._lose, also=self._beat)
        self.retention = None if self.keep_ended is None else Retention(self.store, self.keep_ended)

    def _beat(self) -> None:
        """At each beat, after the tick: the access, the schedules' due occurrences, then the
        resources' keys whose rate bucket holds tokens again."""
        self._recheck()
        schedules.fire_due(self.engine)
        resources.open_due(self.engine.store)

    def _recheck(self) -> None:
        """At each beat: read the credentials again, and end the streams they no longer let
        read."""
        self.access.refresh()
        assert self.streams is not None
        self.streams.recheck(self.access.keeps)

    def _check_open_to_others(self) -> None:
        """Refuse to let other computers in while the database asks no credential of them."""
        if self.address.is_loopback or self.no_auth or self.access.required:
            return
        raise ServeError(
            f"listening on {self.address.host}:{self.address.port} lets other computers in, "
            "and authentication is off in the database; add a credential first "
            f"(stateous auth add NAME --role operator --db {without_password(self.db)}), "
            "or serve with --no-auth"
        )

    def _close_opened(self) -> None:
        self.store.close()
        self.lock.release()

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def _lose(self, lost: TenureLost) -> None:
        log.error("%s; answering not_serving and stopping", lost)
        self.lost = lost
        self.store.fence(NotServing("this control plane no longer holds its database"))
        os.kill(os.getpid(), signal.SIGTERM)

    @property
    def url(self) -> str:
        return self.address.url(self.port)

    def _app(self) -> Any:
        """The WSGI app of the API over this control plane's engine."""
        hosts = served_hosts(self.address.host, self.allowed_hosts)
        guard = Guard(self.access, hosts, served_origins(self.allowed_hosts))
        warning = NO_AUTH if self.no_auth else None
        return create_app(self.engine, guard, warning, self.streams, SERVER_HOOKS)

    def run(self, companion: Companion | None = None) -> int:
        """Serve until a stop signal; return the exit code.

        A `companion` (the supervisor of `--supervise`) is stopped first, while the
        API still answers its last reports; the server stops when it has ended.
        """
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)
        dispatcher = Draining()
        dispatcher.set_thread_count(self.limits.threads)
        if self.no_auth:
            print(f"warning: {NO_AUTH}", file=self.err)
        switch = Switch(create_standby_app() if self.waiting is not None else self._app())
        server = self.server = create_server(
            switch, self.limits, self.listener, dispatcher=dispatcher
        )
        missing = open_files_short(self.limits)
        if missing:
            print(
                f"warning: --connection-limit {self.limits.connection_limit} may need "
                f"{missing} more open files than this process may have (ulimit -n)",
                file=self.err,
            )
        stopper = _Stopper(companion, self._stopping)
        previous = signal.signal(signal.SIGTERM, stopper)
        previous_interrupt = signal.signal(signal.SIGINT, stopper)
        stop = threading.Event()
        waiter = threading.Thread(
            target=self._wait_for_database, args=(switch, stop), name="stateous-standby"
        )
        # The loop runs in a thread of its own, so that a stop signal, which Python raises
        # in the main thread, never breaks into a write that the loop serves. The main
        # thread waits on an event: a join that a signal interrupts may leave the thread
        # marked as ended while it runs on. It waits in short steps: a signal that the
        # kernel hands to another thread does not wake a wait without a timeout, and
        # Python runs its handler only when the main thread next runs.
        ended = threading.Event()
        loop = threading.Thread(
            target=self._loop, args=(server, ended), name="stateous-loop", daemon=True
        )
        try:
            if self.waiting is None:
                self._start_serving()
            else:
                print(
                    f"standby on {self.url}: another control plane serves the database; "
                    "waiting to take it over (Ctrl-C stops)",
                    file=self.err,
                    flush=True,
                )
                waiter.start()
            loop.start()
            while not ended.wait(SIGNAL_CHECK):
                pass
        except KeyboardInterrupt:
            pass  # the stop signal: the loop ends its turn below, then the request threads
        finally:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_interrupt)
            server.stop()
            if loop.ident is not None:
                while not ended.wait(SIGNAL_CHECK):
                    pass
                loop.join()
            dispatcher.shutdown()
            server.drain()
            stop.set()
            if waiter.is_alive():
                waiter.join()
            wasyncore.loop(timeout=0.05, map=server._map, count=20, use_poll=True)
            wasyncore.close_all(server._map)
            self._close()
        for why in (self.lost and self.lost.cause, self.failed, companion and companion.failure):
            if why:
                print(f"error: {why}; this control plane stopped", file=self.err)
                return 1
        print("stopped", file=self.err)
        return 0

    def _loop(self, server: Server, ended: threading.Event) -> None:
        """Run the server's loop until it is stopped; a failure of it stops the process."""
        try:
            server.run()
        except Exception as ex:
            log.exception("the server's loop failed")
            self.failed = ex
        finally:
            ended.set()

    def _stopping(self) -> None:
        """End what waits on the server: the waiting claims and the live streams."""
        self.waits.close()
        if self.streams is not None:
            self.streams.close()

    def _start_serving(self) -> None:
        if self.store.one_writer:
            self.server.serve_writes(self.store)
        self.access.refresh()
        self.clock.start()
        if self.retention is not None:
            self.retention.start()
        if self.older:
            print(versions_line(self.graph, self.older), file=self.err, flush=True)
        freeze_start_up()
        print(f"serving on {self.url} (Ctrl-C stops)", file=self.err, flush=True)

    def _wait_for_database(self, switch: Switch, stop: threading.Event) -> None:
        """A standby's wait: take the serving lock as soon as it is free, then serve."""
        assert self.waiting is not None
        said = ""
        while not stop.wait(STANDBY_EVERY):
            try:
                self.waiting.take()
            except TenureRefused:
                continue
            except Failure as ex:  # the database cannot be reached now: say so once
                if str(ex) != said:
                    said = str(ex)
                    log.warning("%s; the standby goes on waiting", ex)
                continue
            if stop.is_set():
                self.waiting.release()
                return
            try:
                self._open(self.waiting)
            except Exception as ex:  # its lock is given back: another standby may take it
                log.debug("the standby could not serve", exc_info=ex)
                self.failed = ex
                os.kill(os.getpid(), signal.SIGTERM)
                return
            self.waiting = None
            switch.app = self._app()
            print(TOOK_OVER, file=self.err, flush=True)
            self._start_serving()
            return

    def _close(self) -> None:
        """Give the tenure up and close the database (a standby: its lock) and the socket."""
        if self.waiting is not None:
            self.waiting.release()
        else:
            self.clock.stop()
            if self.retention is not None:
                self.retention.stop()
            if self.lost is None:
                try:
                    self.tenure.give_up()
                except Exception as ex:
                    log.warning("could not give up the hold: %s", ex)
            self._close_opened()
        self.listener.close()


class Switch:
    """The WSGI app that the server calls: a standby's until it holds the database, then the
    API's. A request reads `app` once, so it is answered by one or the other."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        return self.app(environ, start_response)


class Companion(Protocol):
    """Something that runs beside the server and must stop before it; `failure` says why it
    ended by itself, if it did."""

    failure: Exception | None

    def request_stop(self) -> None: ...
    def wait(self) -> None: ...


class _Stopper:
    """The SIGINT and SIGTERM handler: stop the companion first, then the server."""

    def __init__(self, companion: Companion | None, stopping: Callable[[], None]) -> None:
        self.companion = companion
        self.stopping = stopping
        self.asked = False

    def __call__(self, signum: int, frame: object) -> None:
        # A claim may wait 30 s for a task, a stream for ever: the stop waits for neither.
        self.stopping()
        if self.companion is None:
            raise KeyboardInterrupt
        self.companion.request_stop()
        if not self.asked:
            self.asked = True
            threading.Thread(target=self._then_stop, name="stateous-stopper", daemon=True).start()

    def _then_stop(self) -> None:
        assert self.companion is not None
        self.companion.wait()
        self.companion = None
        os.kill(os.getpid(), signal.SIGTERM)
