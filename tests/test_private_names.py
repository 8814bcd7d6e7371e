"""The private and undocumented names of our dependencies that Stateous relies on.

One test per dependency lists them, each beside where Stateous uses it and what breaks
without it, and fails with those sentences when an upgrade removes one: before a served
request would. pyproject.toml keeps these dependencies below the next release that may
move such names (waitress <3.1, psycopg <3.4); `http.client` comes with Python, which the
suite runs on each version it supports.
"""

from __future__ import annotations

import http.client
import inspect
import platform
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import pytest


@dataclass(frozen=True)
class Use:
    """Names of one object that Stateous reaches, where it does, and what breaks without them."""

    owner: str
    found: object
    names: tuple[str, ...]
    why: str


def gone(installed: str, uses: list[Use]) -> list[str]:
    """One sentence for each name that the `installed` dependency no longer has (a mapping,
    such as a function's parameters, has its names as keys)."""
    return [
        f"{installed} has no {use.owner}.{name}: {use.why}"
        for use in uses
        for name in use.names
        if not (name in use.found if isinstance(use.found, Mapping) else hasattr(use.found, name))
    ]


def parameters(function: Any) -> Mapping[str, inspect.Parameter]:
    return inspect.signature(function).parameters


@pytest.fixture
def waitress_parts() -> Iterator[dict[str, Any]]:
    """A plain waitress server, a connection, a parsed request and its tasks, as waitress
    makes them (not Stateous's subclasses, which define some of these names themselves)."""
    from waitress.channel import HTTPChannel
    from waitress.parser import HTTPRequestParser
    from waitress.server import TcpWSGIServer
    from waitress.task import ErrorTask, ThreadedTaskDispatcher, WSGITask

    from stateous.control.http.server import DEFAULT_LIMITS, settings

    listener = socket.create_server(("127.0.0.1", 0))
    adj = settings(DEFAULT_LIMITS, listener)
    dispatcher = ThreadedTaskDispatcher()
    server = TcpWSGIServer(
        lambda environ, start_response: [],
        {},
        _sock=listener,
        dispatcher=dispatcher,
        adj=adj,
        bind_socket=False,
        sockinfo=(listener.family, listener.type, listener.proto, listener.getsockname()),
    )
    ours, theirs = socket.socketpair()
    channel = HTTPChannel(server, ours, ("127.0.0.1", 1), adj, map=server._map)
    request = HTTPRequestParser(adj)
    data = b"POST /tokens/A%2Fb?x=1 HTTP/1.1\r\nHost: here\r\nContent-Length: 2\r\n\r\nab"
    while data:
        data = data[request.received(data) :]
    try:
        yield {
            "server": server,
            "dispatcher": dispatcher,
            "channel": channel,
            "buffer": channel.outbufs[0],
            "request": request,
            "task": WSGITask(channel, request),
            "error_task": ErrorTask(channel, request),
        }
    finally:
        channel.close()
        server.close()
        theirs.close()
        listener.close()


def test_waitress_still_has_the_names_the_server_uses(
    waitress_parts: dict[str, Any],
) -> None:
    from waitress import parser, task, utilities, wasyncore
    from waitress.channel import HTTPChannel
    from waitress.server import BaseWSGIServer

    parts = waitress_parts
    edge = "stateous/control/http/server.py"
    uses = [
        Use(
            "BaseWSGIServer.__init__",
            parameters(BaseWSGIServer.__init__),
            ("_sock",),
            f"{edge} create_server hands waitress the socket that `serve` bound and listens "
            "on; without it the server cannot be made and `stateous serve` does not start",
        ),
        Use(
            "BaseWSGIServer.__init__",
            parameters(BaseWSGIServer.__init__),
            ("map", "dispatcher", "adj", "bind_socket", "sockinfo"),
            f"{edge} create_server passes them to serve on that socket with Stateous's "
            "settings and request threads; without them `stateous serve` does not start",
        ),
        Use(
            "TcpWSGIServer()",
            parts["server"],
            ("_map",),
            f"{edge} Server.run polls the server's socket map at each turn of its loop, and "
            "stateous/control/serve.py closes the connections left in it at the stop; "
            "without it the control plane answers nothing",
        ),
        Use(
            "HTTPChannel()",
            parts["channel"],
            ("_fileno",),
            f"{edge} Channel.let_go, to_waiting_room and resume take a connection out of "
            "the server's active channels by its descriptor and put it back; without it "
            "live streams and claims that wait lose their connections",
        ),
        Use(
            "HTTPChannel",
            HTTPChannel,
            ("_flush_some",),
            f"{edge} Channel overrides it to hold the answer of a write until the loop "
            "commits its turn; without it an answer could leave before its change is on disk",
        ),
        Use(
            "HTTPChannel",
            HTTPChannel,
            ("parser_class", "error_task_class", "task_class"),
            f"{edge} Channel sets them to put its parser, refusal and task in waitress's "
            "place; without them ambiguous framing is served, refusals are not JSON, and "
            "streams and claims that wait stop working",
        ),
        Use(
            "HTTPChannel()",
            parts["channel"],
            (
                "server",
                "adj",
                "socket",
                "connected",
                "request",
                "requests",
                "requests_lock",
                "outbuf_lock",
                "outbufs",
                "total_outbufs_len",
                "last_activity",
                "service",
                "received",
                "readable",
                "writable",
                "handle_read",
                "handle_write",
                "handle_close",
                "add_channel",
                "del_channel",
            ),
            f"{edge} Channel reads and overrides them to park a client that does not read, "
            "serve writes on the loop, hand a connection to a stream or the waiting room, "
            "and linger after a refusal; without them connections are served wrong",
        ),
        Use(
            "OverflowableBuffer()",
            parts["buffer"],
            ("get",),
            f"{edge} Task.adopt takes what an earlier answer left unsent before a live "
            "stream owns the socket; without it the stream's first bytes are lost",
        ),
        Use(
            "HTTPRequestParser()",
            parts["request"],
            (
                "parse_header",
                "received",
                "command",
                "version",
                "headers",
                "chunked",
                "content_length",
                "completed",
                "expect_continue",
                "error",
                "body_rcv",
                "get_body_stream",
            ),
            f"{edge} Parser refuses ambiguous framing, needless 100 Continues and bodies "
            "past the limit with them, and a claim that waits keeps its body through them",
        ),
        Use(
            "ErrorTask()",
            parts["error_task"],
            (
                "execute",
                "request",
                "channel",
                "status",
                "response_headers",
                "content_length",
                "set_close_on_finish",
                "write",
            ),
            f"{edge} Refusal writes waitress's own refusals as {{error, code}} JSON with "
            "them; without them a bad request gets waitress's plain-text answer",
        ),
        Use(
            "WSGITask()",
            parts["task"],
            (
                "get_environment",
                "finish",
                "request",
                "channel",
                "build_response_header",
                "wrote_header",
                "chunked_response",
                "close_on_finish",
                "set_close_on_finish",
            ),
            f"{edge} Task hands its connection to a live stream or a claim's wait with "
            "them; without them streams and claims that wait break",
        ),
        Use(
            "TcpWSGIServer()",
            parts["server"],
            (
                "channel_class",
                "trigger",
                "pull_trigger",
                "add_task",
                "active_channels",
                "maintenance",
                "close",
            ),
            f"{edge} Server turns the loop itself, serves writes on it and closes "
            "connections past their time with them; without them the loop stops serving",
        ),
        Use(
            "ThreadedTaskDispatcher()",
            parts["dispatcher"],
            ("queue", "set_thread_count", "shutdown"),
            "stateous/control/serve.py Draining answers the requests already read before "
            "waitress's shutdown; without them a stop drops them or does not finish",
        ),
        Use(
            "waitress.wasyncore",
            wasyncore,
            ("poll2", "loop", "close_all"),
            f"{edge} Server.run polls the sockets itself, and serve closes what is left "
            "with them; without them the control plane neither serves nor stops",
        ),
        Use(
            "waitress",
            utilities,
            ("RequestEntityTooLarge", "RequestHeaderFieldsTooLarge", "ServerNotImplemented"),
            f"{edge} refusal tells waitress's refusals apart by these classes to give "
            "each its status and sentence; without them the edge does not import",
        ),
        Use(
            "waitress.parser",
            parser,
            ("ParsingError",),
            f"{edge} Parser raises it to refuse ambiguous framing; without it the edge "
            "does not import",
        ),
        Use(
            "waitress.task",
            task,
            ("queue_logger",),
            "stateous/control/serve.py quiets the logger named waitress.queue, where waitress "
            "warns of every queued request; without it those warnings fill the log",
        ),
    ]
    installed = f"waitress {version('waitress')}"
    found = gone(installed, uses)
    if parts["task"].get_environment().get("REQUEST_URI") != "/tokens/A%2Fb?x=1":
        found.append(
            f"{installed} no longer keeps the request's target as sent in REQUEST_URI: "
            "stateous/control/http/app.py Paths refuses an encoded slash and Guard checks the host "
            "of an absolute target from it; without it both let every request through"
        )
    if getattr(task, "queue_logger", None) and task.queue_logger.name != "waitress.queue":
        found.append(
            f"{installed} warns of queued requests on {task.queue_logger.name}, not on "
            "waitress.queue, which stateous/control/serve.py quiets; they would fill the log"
        )
    assert not found, "\n".join(found)


def test_http_client_still_has_the_names_the_clients_use() -> None:
    ours, theirs = socket.socketpair()
    try:
        answer = http.client.HTTPResponse(ours)
        connection = http.client.HTTPConnection("127.0.0.1", 1)
        uses = [
            Use(
                "HTTPConnection",
                connection,
                ("response_class",),
                "stateous/supervisor/answers.py BoundedConnection sets it so that every "
                "answer is read against its deadline and length limit; without it a slow or "
                "endless control plane holds the supervisor",
            ),
            Use(
                "HTTPConnection",
                connection,
                ("sock",),
                "stateous/client/http.py Connection sets TCP_NODELAY on the connected socket; "
                "without it every client request waits on Nagle's delay",
            ),
            Use(
                "HTTPResponse",
                answer,
                ("fp",),
                "stateous/supervisor/answers.py _Answer replaces the file it reads from with "
                "one that keeps the deadline; without it an answer may take for ever",
            ),
            Use(
                "HTTPResponse",
                answer,
                ("length",),
                "stateous/supervisor/answers.py _Answer refuses an answer whose announced "
                "length passes the limit and tells a cut body from a whole one; without it "
                "the supervisor takes answers of any length, or cut ones as whole",
            ),
            Use(
                "HTTPResponse",
                answer,
                ("chunked", "chunk_left"),
                "stateous/supervisor/answers.py _Answer reads an answer's head itself and sets "
                "them as HTTPResponse.begin does; without them a chunked answer is read wrong",
            ),
            Use(
                "HTTPResponse",
                answer,
                ("will_close",),
                "stateous/client/http.py Connection closes a connection that the control "
                "plane will close; without it the next request goes to a closed socket",
            ),
        ]
        found = gone(f"http.client of Python {platform.python_version()}", uses)
    finally:
        answer.close()
        ours.close()
        theirs.close()
    assert not found, "\n".join(found)


def test_logging_still_has_the_names_the_commands_use() -> None:
    import logging

    uses = [
        Use(
            "logging",
            logging,
            ("_srcfile",),
            "stateous/cli/supervising.py start_logging sets it to None (the logging HOWTO's "
            "Optimization) so that no record looks up the code that logged it, which the "
            "format never shows; without it every log line of serve and supervise costs a "
            "fifth more",
        ),
    ]
    found = gone(f"logging of Python {platform.python_version()}", uses)
    assert not found, "\n".join(found)


def test_psycopg_still_has_the_names_the_postgres_store_uses() -> None:
    psycopg = pytest.importorskip("psycopg")
    from psycopg import adapt, errors, generators, pq
    from psycopg.types import string

    pipeline = "stateous/control/store/postgres/pipeline.py"
    uses = [
        Use(
            "psycopg",
            psycopg,
            ("generators",),
            f"{pipeline} sends a transaction's statements and reads their answers with "
            "psycopg's libpq generators; without them no Postgres transaction runs",
        ),
        Use(
            "psycopg.generators",
            generators,
            ("send", "fetch_many"),
            f"{pipeline} Pipeline.sync sends what is queued and reads every answer with them; "
            "without them no Postgres transaction runs",
        ),
        Use(
            "psycopg.Connection",
            psycopg.Connection,
            ("wait",),
            f"{pipeline} Pipeline.sync waits on the connection for those generators; without "
            "it no Postgres transaction runs",
        ),
        Use(
            "psycopg.errors",
            errors,
            ("error_from_result",),
            f"{pipeline} Pipeline.sync raises a statement's failure as psycopg's error class "
            "for it; without it a deadlock or a taken key is not told apart",
        ),
        Use(
            "psycopg.adapt.Transformer",
            adapt.Transformer,
            ("dump_sequence", "set_pgresult", "load_rows"),
            f"{pipeline} Pipeline binds values and reads rows through psycopg's adapters "
            "with them; without them no statement is sent or read",
        ),
        Use(
            "psycopg.pq.PGconn",
            pq.PGconn,
            (
                "enter_pipeline_mode",
                "exit_pipeline_mode",
                "send_prepare",
                "send_query_prepared",
                "pipeline_sync",
                "status",
            ),
            f"{pipeline} Pipeline prepares and sends each statement in libpq's pipeline "
            "mode with them; without them no Postgres transaction runs",
        ),
        Use(
            "psycopg.pq.ExecStatus",
            pq.ExecStatus,
            ("PIPELINE_SYNC", "TUPLES_OK", "FATAL_ERROR"),
            f"{pipeline} Pipeline.sync tells the answers apart by them; without them the "
            "store module does not import",
        ),
        Use(
            "psycopg.types.string",
            string,
            ("TextLoader",),
            "stateous/control/store/postgres/connection.py connect reads JSON columns as "
            "text with it, which the shared SQL decodes itself; without it the store does "
            "not import",
        ),
    ]
    found = gone(f"psycopg {version('psycopg')}", uses)
    assert not found, "\n".join(found)
