"""The live stream, `GET /stream`, on real `serve` processes: every ledger entry once, in
the order of its position, across a reconnect with `Last-Event-ID` and across a restart
of the control plane; one token's stream; `stateous token watch`; the bound on streams."""

from __future__ import annotations

import contextlib
import http.client
import queue
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from stateous.cli.history import history_lines
from stateous.client import Client
from stateous.client.errors import ClientError
from stateous.client.watch import events
from tests.conftest import ROOT, run_stateous
from tests.control.conftest import write_graph
from tests.control.serving import Launcher, Served, command, environment
from tests.control.support import Backend, connected

#: How long a test waits for an entry that must come.
WAIT = 10.0

Event = tuple[int, dict[str, Any]]


class Reader:
    """One open stream on a connection of its own; its events arrive in a queue."""

    def __init__(
        self,
        served: Served,
        path: str = "/stream",
        last: int | str | None = None,
        secret: str | None = None,
    ) -> None:
        self.connection = served.connect(timeout=30)
        headers = {} if last is None else {"Last-Event-ID": str(last)}
        if secret is not None:
            headers["Authorization"] = f"Bearer {secret}"
        self.connection.request("GET", path, headers=headers)
        # The answer ends with the connection, so the response takes its socket over.
        self.socket = self.connection.sock
        self.response = self.connection.getresponse()
        self.events: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
        if self.response.status == 200:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for ident, data in events(self.response):
                assert ident is not None
                self.events.put((ident, msgspec.json.decode(data)))
        except (OSError, http.client.HTTPException, ValueError):
            pass
        self.events.put(None)

    def take(self, count: int) -> list[Event]:
        """The next `count` events; fail if they do not come in time."""
        taken = []
        deadline = time.monotonic() + WAIT
        while len(taken) < count:
            event = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            assert event is not None, f"the stream ended after {taken}"
            taken.append(event)
        return taken

    def ended_within(self, seconds: float) -> list[Event]:
        """The events that came before the stream ended; fail if it is open after `seconds`."""
        came = []
        deadline = time.monotonic() + seconds
        while (event := self.events.get(timeout=max(0.0, deadline - time.monotonic()))) is not None:
            came.append(event)
        return came

    def refusal(self) -> tuple[int, dict[str, Any]]:
        return self.response.status, msgspec.json.decode(self.response.read())

    def close(self) -> None:
        """Close the connection as a client that leaves does."""
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    return write_graph(tmp_path)


def serve(launcher: Launcher, graph: Path, backend: Backend, *options: str, **keys: Any) -> Served:
    return launcher.serve(graph, None, "--db", backend.db, *options, **keys)


def ledger(backend: Backend) -> list[tuple[int, str, int, str]]:
    """Every ledger row as the database keeps it: position, token, number, kind."""
    with connected(backend) as run:
        rows = run("SELECT pos, token, seq, kind FROM ledger ORDER BY pos")
    return [(int(pos), token, int(seq), kind) for pos, token, seq, kind in rows]


def rows_of(taken: list[Event]) -> list[tuple[int, str, int, str]]:
    return [(ident, entry["token"], entry["seq"], entry["kind"]) for ident, entry in taken]


def start(served: Served, token: str) -> None:
    served.ok("POST", "/tokens", {"token": token, "context": {"title": "t"}})


def move(served: Served, token: str) -> None:
    """Start `token` and send it on to review: 9 ledger entries."""
    start(served, token)
    served.ok("POST", f"/tokens/{token}/events/submitted", {})


def streamed(served: Served, token: str, index: int) -> dict[str, Any]:
    """An entry of the token's history as a stream sends it: with the token's id, without
    the sentence (`text`) that the history adds."""
    entry = served.history(token)[index]
    del entry["text"]
    return {"token": token, **entry}


def test_a_stream_gives_every_entry_once_across_a_reconnect_with_last_event_id(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    served = serve(launcher, graph, backend)
    start(served, "BEFORE")  # before the stream: from its first id on, it comes too
    first = Reader(served, last=0)
    move(served, "A-1")
    got = first.take(8)
    first.close()
    move(served, "A-2")  # while no stream is open
    second = Reader(served, last=got[-1][0])
    move(served, "A-3")
    everything = ledger(backend)
    got += second.take(len(everything) - len(got))

    assert rows_of(got) == everything
    assert [ident for ident, _ in got] == sorted({ident for ident, _ in got})
    assert got[0][1] == streamed(served, "BEFORE", 0)
    second.close()


def test_a_stream_without_an_id_starts_with_the_next_entry(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    served = serve(launcher, graph, backend)
    move(served, "OLD")
    reader = Reader(served)
    served.request("HEAD", "/stream")  # a round trip after the stream was opened
    start(served, "NEW")
    taken = reader.take(4)

    assert {entry["token"] for _, entry in taken} == {"NEW"}
    assert rows_of(taken) == [row for row in ledger(backend) if row[1] == "NEW"]
    reader.close()


def test_the_stream_of_one_token_gives_its_history_then_its_new_entries_only(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    served = serve(launcher, graph, backend)
    start(served, "A")
    start(served, "B")
    reader = Reader(served, "/stream?token=A")
    served.ok("POST", "/tokens/B/events/submitted", {})
    served.ok("POST", "/tokens/A/events/submitted", {})
    served.ok("POST", "/tokens/A/cancel", {})
    of_a = [row for row in ledger(backend) if row[1] == "A"]
    taken = reader.take(len(of_a))

    assert rows_of(taken) == of_a
    assert [entry["seq"] for _, entry in taken] == list(range(1, len(of_a) + 1))
    assert taken[-1][1]["kind"] == "cancelled"
    reader.close()


def test_bad_stream_requests_are_refused_with_their_codes(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    served = serve(launcher, graph, backend)
    unknown = Reader(served, "/stream?token=NOBODY").refusal()
    bad_id = Reader(served, last="twelve").refusal()

    assert unknown == (404, {"error": "no token has the id 'NOBODY'", "code": "token_not_found"})
    assert bad_id == (
        422,
        {
            "error": "Last-Event-ID must be an event id of this stream, not 'twelve'",
            "code": "invalid_argument",
        },
    )


@pytest.fixture
def clients() -> Iterator[list[Client]]:
    made: list[Client] = []
    yield made
    for client in made:
        client.close()


def test_a_restart_of_the_control_plane_loses_and_repeats_no_entry_of_a_watch(
    launcher: Launcher, graph: Path, backend: Backend, clients: list[Client]
) -> None:
    first = serve(launcher, graph, backend)
    client = Client(first.url, timeout=5)
    clients.append(client)
    got: list[dict[str, Any]] = []

    def watching() -> None:
        # It follows until the test's control plane is gone, then gives up quietly.
        with contextlib.suppress(ClientError):
            for entry in client.watch(after=0, retry_for=15):
                got.append(entry)

    move(first, "A-1")
    watcher = threading.Thread(target=watching, daemon=True)
    watcher.start()
    move(first, "A-2")
    first.kill()  # SIGKILL: the stream is cut, not ended
    second = serve(launcher, graph, backend, listen=f"127.0.0.1:{first.port}")
    move(second, "A-3")
    deadline = time.monotonic() + WAIT
    while len(got) < len(everything := ledger(backend)) and time.monotonic() < deadline:
        time.sleep(0.05)
    start(second, "LAST")  # an entry twice would come before these
    while got[-1:] != [streamed(second, "LAST", -1)]:
        assert time.monotonic() < deadline, f"{len(got)} of {len(ledger(backend))} entries came"
        time.sleep(0.05)

    assert [(entry["token"], entry["seq"], entry["kind"]) for entry in got] == [
        row[1:] for row in ledger(backend)
    ]
    assert len(everything) == 27


def test_ids_go_on_after_a_restart_when_retention_removed_the_newest_entries(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    first = serve(launcher, graph, backend, "--keep-ended", "1s")
    start(first, "A")
    first.ok("POST", "/tokens/A/cancel", {})
    reader = Reader(first, last=0)
    seen = reader.take(len(first.history("A")))
    reader.close()
    deadline = time.monotonic() + WAIT
    while first.request("GET", "/tokens/A")[0] != 404:
        assert time.monotonic() < deadline, "retention did not remove A in time"
        time.sleep(0.2)
    assert ledger(backend) == []
    assert first.stop() == 0
    second = serve(launcher, graph, backend)
    resumed = Reader(second, last=seen[-1][0])
    start(second, "B")
    taken = resumed.take(4)

    assert rows_of(taken) == ledger(backend)
    assert {entry["token"] for _, entry in taken} == {"B"}
    assert taken[0][0] > seen[-1][0]
    resumed.close()


def test_token_watch_prints_the_history_lines_as_they_happen_and_ends_with_the_token(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    served = serve(launcher, graph, backend)
    start(served, "A")
    watch = subprocess.Popen(
        command("token", "watch", "A", "--url", served.url),
        cwd=ROOT,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        lines = [watch.stdout.readline() for _ in range(5)]  # the heading and 4 entries
        served.ok("POST", "/tokens/A/events/submitted", {})
        served.ok("POST", "/tokens/A/events/reviewed", {"payload": {"approved": True}})
        out, err = watch.communicate(timeout=WAIT)
    finally:
        if watch.poll() is None:
            watch.kill()

    assert (watch.returncode, err) == (0, "")
    assert "".join(lines) + out == "\n".join(history_lines(served.history("A"))) + "\n"
    assert out.rstrip().endswith("completed")


def test_token_watch_of_no_token_prints_only_the_refusal(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    served = serve(launcher, graph, backend)
    done = subprocess.run(
        command("token", "watch", "NOPE", "--url", served.url),
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: the control plane at {served.url} refused (404): no token has the id 'NOPE'"
    ]


def test_past_the_bound_a_stream_is_refused_while_fires_are_still_answered(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    served = serve(launcher, graph, backend, "--streams", "2", "--threads", "2")
    start(served, "A")
    open_streams = [Reader(served), Reader(served, "/stream?token=A")]
    open_streams[1].take(4)
    refused = Reader(served)

    assert refused.refusal() == (
        503,
        {
            "error": "2 streams are open, the most this control plane serves; try again later",
            "code": "too_many_streams",
        },
    )
    assert served.request("POST", "/tokens/A/events/submitted", {})[0] == 200
    assert next(event[1]["kind"] for event in open_streams[0].take(5)) == "event_accepted"
    open_streams[0].close()
    # The place of a stream whose client left is given back.
    deadline = time.monotonic() + WAIT
    while (again := Reader(served)).response.status != 200:
        again.close()
        assert time.monotonic() < deadline, "the place was not given back"
        time.sleep(0.1)
    again.close()
    open_streams[1].close()


def test_a_stop_signal_ends_the_open_streams_and_serve_stops_at_once(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    served = serve(launcher, graph, backend)
    readers = [Reader(served) for _ in range(3)]
    served.request("HEAD", "/stream")
    began = time.monotonic()

    assert served.stop() == 0
    assert time.monotonic() - began < 5
    for reader in readers:
        assert reader.events.get(timeout=WAIT) is None  # the answer ended


def read_until(sock: socket.socket, end: bytes) -> bytes:
    """Read from a raw socket until `end` has come."""
    sock.settimeout(WAIT)
    data = b""
    while end not in data:
        more = sock.recv(65536)
        assert more, f"the connection ended after {data!r}"
        data += more
    return data


def test_a_stream_after_another_answer_on_its_connection_and_one_over_http_1_0(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    served = serve(launcher, graph, backend)
    start(served, "A")
    address = ("127.0.0.1", served.port)
    host = f"Host: 127.0.0.1:{served.port}\r\n"
    with socket.create_connection(address) as piped, socket.create_connection(address) as old:
        piped.sendall(
            f"GET /health HTTP/1.1\r\n{host}\r\nGET /stream?token=A HTTP/1.1\r\n{host}\r\n".encode()
        )
        old.sendall(f"GET /stream?token=A HTTP/1.0\r\n{host}\r\n".encode())
        answers = read_until(piped, b"event: task_queued\ndata: ")
        plain = read_until(old, b"event: task_queued\ndata: ")

    health, _, stream = answers.partition(b"HTTP/1.1 200 OK\r\nCache-Control")
    assert health.startswith(b"HTTP/1.1 200 OK") and b'"workflow":"orders"' in health
    assert b"Transfer-Encoding: chunked\r\n" in stream and b"Connection: close\r\n" in stream
    assert b"X-Accel-Buffering: no\r\n" in stream
    assert b"id: 1\nevent: started\n" in stream
    assert plain.startswith(b"HTTP/1.0 200 OK") and b"Transfer-Encoding" not in plain
    assert b"\r\n\r\nid: 1\nevent: started\ndata: " in plain


# streams and credentials


def auth(backend: Backend, *args: str) -> str:
    """Run `stateous auth ARGS` on the backend's database; answer its output."""
    done = run_stateous("auth", *args, "--db", backend.db, cwd=backend.folder)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def start_as(served: Served, secret: str, token: str) -> None:
    body = {"token": token, "context": {"title": "t"}}
    status, _ = served.request("POST", "/tokens", body, {"Authorization": f"Bearer {secret}"})
    assert status == 201


def test_a_stream_ends_within_a_beat_once_its_credential_is_revoked(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    ops = auth(backend, "add", "ops-1", "--role", "operator")
    watcher = auth(backend, "add", "screen", "--role", "operator")
    served = serve(launcher, graph, backend)
    reader = Reader(served, secret=watcher)
    start_as(served, ops, "BEFORE")
    assert reader.take(4)[0][1]["token"] == "BEFORE"

    auth(backend, "revoke", "screen")
    revoked = time.monotonic()
    started: dict[str, float] = {}
    came: list[Event] = []
    while True:
        token = f"AFTER-{len(started)}"
        start_as(served, ops, token)
        started[token] = time.monotonic() - revoked
        taken = [reader.events.get() for _ in range(reader.events.qsize())]
        came += [event for event in taken if event is not None]
        if None in taken:
            break
        assert time.monotonic() - revoked < 2.5, "the stream is still open"
        time.sleep(0.1)

    # entries of at most a beat of the clock after the revocation came, none later
    assert all(started.get(entry["token"], 0.0) < 1.5 for _, entry in came), came
    start_as(served, ops, "LATER")
    assert reader.events.empty()
    status, answer = Reader(served, secret=watcher).refusal()
    assert (status, answer["code"]) == (401, "unauthorized")
    reader.close()


def test_a_stream_opened_without_a_credential_ends_once_authentication_turns_on(
    launcher: Launcher, graph: Path, backend: Backend
) -> None:
    served = serve(launcher, graph, backend)
    reader = Reader(served)
    start(served, "OPEN")
    reader.take(4)

    ops = auth(backend, "add", "ops-1", "--role", "operator")
    began = time.monotonic()
    reader.ended_within(3)

    assert time.monotonic() - began < 2.5
    start_as(served, ops, "CLOSED")
    assert reader.events.empty()
    reader.close()
