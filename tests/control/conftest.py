"""Fixtures for a real control plane: the `orders` graph, its database (SQLite, and Postgres
when STATEOUS_TEST_POSTGRES is set: the `backend`), waitress on a port."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
from waitress import wasyncore

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from stateous.control.http.app import Guard, create_app
from stateous.control.http.server import (
    DEFAULT_LIMITS,
    SERVER_HOOKS,
    Limits,
    Server,
    create_server,
)
from stateous.model.graph_file import dump
from tests.control.support import BACKENDS, Backend, open_backend

Answer = tuple[int, dict[str, str], Any]


class Item(msgspec.Struct):
    """The context of an order."""

    title: str
    amount: int = 0


class Verdict(msgspec.Struct):
    """The payload of `reviewed`."""

    approved: bool
    note: str = ""


def orders() -> Workflow:
    """The `orders` starter: draft, then review, whose verdict ends the token or sends it back."""
    flow = Workflow("orders", context=Item)
    draft = flow.state("draft")
    review = flow.state("review", timeout="1h", retries=1)
    submitted = flow.event("submitted")
    reviewed = flow.event("reviewed", payload=Verdict)
    flow.transition(START, draft)
    flow.transition(draft, review, on=submitted)
    flow.transition(review, END, on=reviewed, when="payload.approved == true")
    flow.transition(review, draft, on=reviewed, otherwise=True)
    return flow


def write_graph(folder: Path) -> Path:
    """Compile `orders` and write its graph file into `folder`."""
    path = folder / "orders.json"
    path.write_bytes(dump(compile_workflow(orders())))
    return path


def build_engine(backend: Backend, kind: type[Engine] = Engine, **limits: Any) -> Engine:
    """An engine of class `kind` over the `orders` graph and the backend's fresh database."""
    graph = Graph.load(write_graph(backend.folder))
    return kind(graph, backend.store(**limits), lease=120)


def read_answer(response: http.client.HTTPResponse) -> Answer:
    """Read a whole answer: status, headers (lower-case names), and the JSON body or None;
    the bytes of a page or a file of the dashboard."""
    data = response.read()
    headers = {name.lower(): value for name, value in response.getheaders()}
    if headers.get("content-type", "").startswith(("text/", "image/")):
        return response.status, headers, data
    return response.status, headers, msgspec.json.decode(data) if data else None


def send(
    connection: http.client.HTTPConnection,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> Answer:
    """Send one request on `connection`: `body` is encoded as JSON, `raw` is sent as is; a
    POST or PUT says it is JSON, as every client of ours does, unless `headers` say else."""
    data = raw if raw is not None else None if body is None else msgspec.json.encode(body)
    typed = {"Content-Type": "application/json"} if method in ("POST", "PUT") else {}
    connection.request(method, path, body=data, headers={**typed, **(headers or {})})
    return read_answer(connection.getresponse())


class Served:
    """A control plane served on a local port, with a small HTTP client."""

    def __init__(self, engine: Engine, port: int) -> None:
        self.engine = engine
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def connect(self) -> http.client.HTTPConnection:
        """A new connection to the server (kept alive until closed)."""
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
        connection: http.client.HTTPConnection | None = None,
    ) -> Answer:
        """Send one request, on `connection` or on a fresh one, and return its answer."""
        if connection is not None:
            return send(connection, method, path, body, headers, raw)
        fresh = self.connect()
        try:
            return send(fresh, method, path, body, headers, raw)
        finally:
            fresh.close()


@contextmanager
def looping(server: Server, sockets: dict[int, Any]) -> Iterator[None]:
    """Run the loop of `server`, whose socket map is `sockets`, for a block, in a thread as
    `serve` does.

    The test owns the socket map, so that it can stop the loop first and close every socket
    after, from one thread: no socket closes under a running loop.
    """
    thread = threading.Thread(target=server.run, name="stateous-loop", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.stop()
        thread.join()
        server.task_dispatcher.shutdown()
        server.drain()
        wasyncore.close_all(sockets)


@contextmanager
def serving(
    engine: Engine, limits: Limits = DEFAULT_LIMITS, guard: Guard | None = None
) -> Iterator[Served]:
    """Serve `engine` as `serve` does (`create_app` on the edge's waitress, behind `guard`
    when given) for a block, on a free port of 127.0.0.1, then close its store."""
    sockets: dict[int, Any] = {}
    listener = socket.create_server(("127.0.0.1", 0))
    app = create_app(engine, guard, hooks=SERVER_HOOKS)
    server = create_server(app, limits, listener, map=sockets)
    if engine.store.one_writer:
        server.serve_writes(engine.store)
    try:
        with looping(server, sockets):
            yield Served(engine, int(server.effective_port))
    finally:
        engine.store.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh database for the test: SQLite, and Postgres when the server is given."""
    with open_backend(request.param, tmp_path) as fresh:
        yield fresh


@pytest.fixture
def served(backend: Backend) -> Iterator[Served]:
    """The `orders` control plane over the backend's fresh database, served on a free port."""
    with serving(build_engine(backend)) as control_plane:
        yield control_plane


@pytest.fixture
def serve_engine(backend: Backend) -> Iterator[Callable[[type[Engine]], Served]]:
    """Serve an engine of a given Engine subclass, for errors that only a fake can raise."""
    with ExitStack() as stack:
        yield lambda kind: stack.enter_context(serving(build_engine(backend, kind)))
