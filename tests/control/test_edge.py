"""The HTTP edge over raw sockets: framing that could smuggle a request, clients that starve
the server, bodies past the limit, and every refusal that waitress itself writes."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from stateous.control.engine import Engine
from stateous.control.http.server import Limits, create_server
from tests.control.conftest import Served, build_engine, looping, read_answer, serving
from tests.control.raw import (
    big_token_body,
    closed_by_server,
    exchange,
    is_refusal,
    open_socket,
    parse_replies,
    pipelining_without_reading,
    read_until_closed,
    request_bytes,
)
from tests.control.support import Backend

#: How long an answer that must not wait may take on a loaded machine.
SOON = 3.0
SMUGGLED = request_bytes("POST", "/tokens", {"token": "SMUGGLED-1", "context": {"title": "x"}})


def start(served: Served, token: str = "ORDER-1", body: dict[str, Any] | None = None) -> None:
    status, _, answer = served.request(
        "POST", "/tokens", body or {"token": token, "context": {"title": "an order"}}
    )
    assert status == 201, answer


def smuggled_ran(served: Served) -> bool:
    return served.request("GET", "/tokens/SMUGGLED-1")[0] == 200


# Smuggling: one request's framing read two ways.


def test_a_request_with_both_content_length_and_chunked_is_refused_and_what_follows_never_runs(
    served: Served,
) -> None:
    body = b"0\r\n\r\n" + SMUGGLED
    head = (
        "POST /tokens HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Length: {len(body)}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    replies, closed = exchange(served.port, head.encode() + body)
    assert len(replies) == 1 and is_refusal(replies[0], 400, "bad_request"), replies
    assert closed
    assert not smuggled_ran(served)


def test_an_http_1_0_request_with_transfer_encoding_is_refused_and_what_follows_never_runs(
    served: Served,
) -> None:
    head = b"POST /tokens HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
    replies, closed = exchange(served.port, head + b"0\r\n\r\n" + SMUGGLED)
    assert len(replies) == 1 and is_refusal(replies[0], 400, "bad_request"), replies
    assert closed
    assert not smuggled_ran(served)


# Clients that hold connections: pipelining without reading, trickling in.


def answers_soon(served: Served) -> None:
    """`/health` and a fire both answer within SOON seconds."""
    connection = served.connect()
    connection.timeout = SOON
    try:
        began = time.monotonic()
        assert served.request("GET", "/health", connection=connection)[0] == 200
        fired = served.request("POST", "/tokens/ORDER-1/events/submitted", connection=connection)
        assert fired[0] == 200, fired
        assert time.monotonic() - began < SOON
    finally:
        connection.close()


def test_clients_that_pipeline_and_never_read_leave_health_and_fires_answering(
    served: Served,
) -> None:
    start(served)
    start(served, body=big_token_body("BIG-1"))
    stuck = pipelining_without_reading(served.port, "/tokens/BIG-1", connections=8, depth=40)
    try:
        time.sleep(1.0)
        answers_soon(served)
    finally:
        for sock in stuck:
            sock.close()


@pytest.fixture
def impatient(backend: Backend) -> Iterator[Served]:
    """The `orders` control plane with a channel timeout of one second."""
    with serving(build_engine(backend), Limits(channel_timeout=1)) as control_plane:
        yield control_plane


def test_a_connection_that_stops_reading_its_answers_is_closed_after_the_channel_timeout(
    impatient: Served,
) -> None:
    start(impatient, body=big_token_body("BIG-1"))
    (sock,) = pipelining_without_reading(impatient.port, "/tokens/BIG-1", connections=1, depth=40)
    with sock:
        time.sleep(4.0)
        received, closed = read_until_closed(sock, timeout=SOON)
    assert closed
    assert len(parse_replies(received)) < 40


def test_a_request_that_trickles_in_is_cut_after_the_channel_timeout(impatient: Served) -> None:
    with open_socket(impatient.port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        began = time.monotonic()
        closed = False
        while not closed and time.monotonic() - began < 6.0:
            try:
                sock.sendall(b"X")
            except OSError:
                closed = True
            closed = closed or closed_by_server(sock, 0.3)
    assert closed and time.monotonic() - began < 5.0


def test_an_idle_kept_alive_connection_is_closed_after_the_channel_timeout(
    impatient: Served,
) -> None:
    with open_socket(impatient.port) as sock:
        sock.sendall(request_bytes("GET", "/health"))
        received, closed = read_until_closed(sock, timeout=4.0)
    assert [reply.status for reply in parse_replies(received)] == [200]
    assert closed


# Pipelined requests: each sees what the one before it wrote.


def test_a_read_pipelined_after_a_write_sees_the_write(served: Served) -> None:
    rounds = 20
    for number in range(rounds):
        token = f"PIPE-{number}"
        start = request_bytes("POST", "/tokens", {"token": token, "context": {"title": "x"}})
        fire = request_bytes("POST", f"/tokens/{token}/events/submitted")
        read = request_bytes("GET", f"/tokens/{token}", headers={"Connection": "close"})
        replies, _ = exchange(served.port, start + fire + read)
        assert [reply.status for reply in replies] == [201, 200, 200], replies
        assert replies[2].body["state"] == replies[1].body["state"] == "review", replies


# Bodies past the limit, refused before they are read.


def test_a_body_over_one_mib_is_refused_from_its_content_length_before_it_is_sent(
    served: Served,
) -> None:
    head = b"POST /tokens HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 200000000\r\n\r\n"
    replies, closed = exchange(served.port, head, timeout=SOON)
    assert len(replies) == 1 and is_refusal(replies[0], 413, "bad_request"), replies
    assert "200000000" in replies[0].body["error"]
    assert closed


def test_a_chunked_body_over_one_mib_is_refused_while_it_is_still_coming(
    served: Served,
) -> None:
    head = b"POST /tokens HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    with open_socket(served.port) as sock:
        sock.sendall(head + b"8000000\r\n")
        for _ in range(18):
            sock.sendall(b" " * 65536)
        received, closed = read_until_closed(sock, timeout=SOON)
    replies = parse_replies(received)
    assert len(replies) == 1 and is_refusal(replies[0], 413, "bad_request"), replies
    assert closed


# Expect: 100-continue.


def test_expect_100_continue_on_a_request_without_a_body_is_answered(served: Served) -> None:
    with open_socket(served.port) as sock:
        sock.sendall(request_bytes("GET", "/health", headers={"Expect": "100-continue"}))
        received, _ = read_until_closed(sock, timeout=SOON)
    assert [reply.status for reply in parse_replies(received)] == [200]


def test_expect_100_continue_on_a_body_gets_a_continue_then_the_answer(served: Served) -> None:
    request = request_bytes(
        "POST",
        "/tokens",
        {"token": "LATER-1", "context": {"title": "x"}},
        {"Expect": "100-continue"},
    )
    head, _, body = request.partition(b"\r\n\r\n")
    with open_socket(served.port) as sock:
        sock.sendall(head + b"\r\n\r\n")
        first, _ = read_until_closed(sock, timeout=1.0)
        sock.sendall(body)
        rest, _ = read_until_closed(sock, timeout=1.0)
    assert first == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert [reply.status for reply in parse_replies(rest)] == [201]


def test_expect_100_continue_on_a_body_over_the_limit_gets_the_413_and_no_continue(
    served: Served,
) -> None:
    head = (
        b"POST /tokens HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
        b"Content-Length: 2000000\r\n\r\n"
    )
    replies, closed = exchange(served.port, head, timeout=SOON)
    assert [reply.status for reply in replies] == [413] and closed


# Every refusal that waitress writes itself, as ours.

HOST = b"Host: 127.0.0.1\r\n"
EDGE_REFUSALS = {
    "a header line without a colon": (b"GET /health HTTP/1.1\r\n" + HOST + b"Broken\r\n\r\n", 400),
    "a Content-Length that is not a number": (
        b"POST /tokens HTTP/1.1\r\n" + HOST + b"Content-Length: ten\r\n\r\n",
        400,
    ),
    "two Content-Lengths that differ": (
        b"POST /tokens HTTP/1.1\r\n" + HOST + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        400,
    ),
    "a chunk size that is not hexadecimal": (
        b"POST /tokens HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
        400,
    ),
    "a chunk not ended by CRLF": (
        b"POST /tokens HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX",
        400,
    ),
    "a transfer coding other than chunked": (
        b"POST /tokens HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: gzip\r\n\r\n",
        400,
    ),
    "a lower-case method": (b"get /health HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    "a start line that is not HTTP": (b"\x16\x03\x01 hello\r\n" + HOST + b"\r\n", 400),
    "a bare LF inside a header": (
        b"GET /health HTTP/1.1\r\n" + HOST + b"X-A: 1\nX-B: 2\r\n\r\n",
        400,
    ),
    "headers past 64 KiB": (
        b"GET /health HTTP/1.1\r\n" + HOST + b"X-Big: " + b"a" * 70_000 + b"\r\n\r\n",
        431,
    ),
}


@pytest.mark.parametrize("case", list(EDGE_REFUSALS))
def test_each_refusal_of_the_http_edge_is_our_json_and_closes_the_connection(
    served: Served, case: str
) -> None:
    data, status = EDGE_REFUSALS[case]
    replies, closed = exchange(served.port, data, timeout=SOON)
    assert len(replies) == 1 and is_refusal(replies[0], status, "bad_request"), replies
    assert closed


def failing_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """A WSGI app that breaks the WSGI rules, so that waitress itself answers 500."""
    start_response("200 OK", [("Connection", "keep-alive")])
    return [b"{}"]


def test_an_app_that_breaks_wsgi_gets_our_json_500_and_the_log_line_stays_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sockets: dict[int, Any] = {}
    listener = socket.create_server(("127.0.0.1", 0))
    server = create_server(failing_app, Limits(threads=1), listener, map=sockets)
    caplog.set_level(logging.ERROR, logger="waitress")
    with looping(server, sockets):
        replies, _ = exchange(
            int(server.effective_port), request_bytes("GET", "/a%0Aforged%E2%80%A8")
        )
    assert len(replies) == 1 and is_refusal(replies[0], 500, "unexpected"), replies
    served = [record.getMessage() for record in caplog.records if "serving" in record.getMessage()]
    assert served and all("\n" not in line and "\u2028" not in line for line in served), served
    assert any("\\x0a" in line for line in served)


# Log lines that carry a value from a request.


class Broken(Engine):
    """An engine whose `get` fails as no real request makes it."""

    def get(self, token: str) -> Any:
        raise RuntimeError("broken on purpose")


def test_a_path_with_control_characters_cannot_forge_a_log_line(
    serve_engine: Any, caplog: pytest.LogCaptureFixture
) -> None:
    served = serve_engine(Broken)
    caplog.set_level(logging.ERROR, logger="stateous.control.api")
    forged = "/tokens/A%0D%0A2026-01-01%2000:00:00%20forged%C2%85x%E2%80%A9y"
    assert served.request("GET", forged)[0] == 500
    (record,) = [r for r in caplog.records if r.name == "stateous.control.api"]
    line = record.getMessage()
    assert not any(char in line for char in "\r\n\x85\u2028\u2029"), line
    assert "A\\x0d\\x0a2026-01-01" in line and "\\x85" in line and "\\u2029" in line


def test_a_client_that_sends_a_large_body_whole_before_reading_still_reads_the_413(
    served: Served,
) -> None:
    connection = served.connect()
    try:
        connection.request("POST", "/tokens", body=b" " * 50_000_000)
        status, _, answer = read_answer(connection.getresponse())
    finally:
        connection.close()
    assert (status, answer["code"]) == (413, "bad_request")


# Request targets.


@pytest.mark.parametrize("slash", ["%2F", "%2f"])
def test_an_encoded_slash_in_a_path_is_refused_not_routed_as_a_slash(
    served: Served, slash: str
) -> None:
    start(served)
    target = f"/tokens/ORDER-1{slash}cancel"
    [reply], _ = exchange(served.port, request_bytes("POST", target, {}, {"Connection": "close"}))
    assert is_refusal(reply, 400, "bad_request"), reply
    assert "%2F" in reply.body["error"]
    assert served.request("GET", "/tokens/ORDER-1")[2]["status"] == "active"
