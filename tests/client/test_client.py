"""`stateous.Client` against a real `stateous serve` process: every method, every error class.

The `orders` workflow is served on a fresh database for each test. The retries on a
busy database need an engine that says so on purpose: that one is served in this
process, through the same app and waitress, over a real port.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from stateous import Client
from stateous.client import ClientError, NotFound, Refused, Unreachable
from stateous.client.client import BUSY_RETRIES
from stateous.control.engine import Engine
from stateous.control.errors import DatabaseBusy
from stateous.model.graph_file import checksum
from tests.client.silent import silent_control_plane
from tests.control.conftest import Served as ServedEngine
from tests.control.conftest import build_engine, serving
from tests.control.serving import Launcher, Served, orders, write_graph
from tests.control.support import open_backend

ITEM = {"title": "first order"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    launcher = Launcher(tmp_path)
    try:
        graph = tmp_path / "orders.json"
        write_graph(graph, orders())
        yield launcher.serve(graph, tmp_path / "orders.sqlite")
    finally:
        launcher.close()


@pytest.fixture
def client(served: Served) -> Iterator[Client]:
    with Client(served.url) as opened:
        yield opened


def claim(served: Served, state: str) -> dict[str, Any]:
    return served.ok("POST", "/tasks/claim", {"supervisor": "box-1", "states": [state]})


def test_start_answers_the_new_token_and_then_the_same_one(client: Client) -> None:
    token = client.start("ORDER-1", ITEM)
    assert {key: token[key] for key in ("token", "state", "status", "visit", "context")} == {
        "token": "ORDER-1",
        "state": "draft",
        "status": "active",
        "visit": 1,
        "context": ITEM,
    }
    assert client.start("ORDER-1", {"title": "another"}) == token


def test_fire_answers_the_token_and_a_used_key_answers_duplicate(client: Client) -> None:
    client.start("ORDER-1", ITEM)
    moved = client.fire("ORDER-1", "submitted", key="delivery-1")
    assert (moved["state"], moved["status"]) == ("review", "active")
    ended = client.fire("ORDER-1", "reviewed", {"approved": True})
    assert (ended["state"], ended["status"]) == ("review", "completed")
    assert client.fire("ORDER-1", "submitted", key="delivery-1") == {
        "duplicate": True,
        "token": ended,
    }


def test_get_and_history_read_a_token(client: Client) -> None:
    started = client.start("ORDER-1", ITEM)
    # with the checksum of the graph file it moves by, which only a read of one token shows
    assert client.get("ORDER-1") == {**started, "checksum": client.health()["checksum"]}
    history = client.history("ORDER-1")
    assert [entry["kind"] for entry in history] == [
        "started",
        "event_accepted",
        "entered",
        "task_queued",
    ]
    assert [entry["seq"] for entry in history] == [1, 2, 3, 4]


def test_tokens_filters_by_status_and_limit(client: Client) -> None:
    for number in (1, 2, 3):
        client.start(f"ORDER-{number}", ITEM)
    client.cancel("ORDER-2")
    assert [token["token"] for token in client.tokens()] == ["ORDER-2", "ORDER-3", "ORDER-1"]
    assert [token["token"] for token in client.tokens(status="active")] == ["ORDER-3", "ORDER-1"]
    assert [token["token"] for token in client.list(limit=1)] == ["ORDER-2"]
    assert client.tokens(parent="ORDER-1") == []


def test_pause_resume_and_cancel_answer_the_token(client: Client) -> None:
    client.start("ORDER-1", ITEM)
    assert client.pause("ORDER-1")["status"] == "paused"
    assert client.fire("ORDER-1", "submitted")["status"] == "paused"
    resumed = client.resume("ORDER-1")
    assert (resumed["state"], resumed["status"]) == ("review", "active")
    assert client.cancel("ORDER-1")["status"] == "cancelled"


def test_report_ends_a_waiting_task_with_an_event(client: Client, served: Served) -> None:
    client.start("ORDER-1", ITEM)
    grant = claim(served, "draft")
    served.ok("POST", f"/tasks/{grant['task']}/report", {"kind": "waiting", "supervisor": "box-1"})
    with pytest.raises(Refused) as refused:
        client.report(grant["task"], "submitted", attempt=2)
    assert (refused.value.status, refused.value.code) == (409, "task_not_held")
    moved = client.report(grant["task"], "submitted", attempt=1)
    assert (moved["state"], moved["status"]) == ("review", "active")
    review = claim(served, "review")
    served.ok("POST", f"/tasks/{review['task']}/report", {"kind": "waiting", "supervisor": "box-1"})
    ended = client.report(review["task"], "reviewed", {"approved": True})
    assert ended["status"] == "completed"


def test_workflow_and_health_describe_the_served_graph(client: Client, tmp_path: Path) -> None:
    graph = write_graph(tmp_path / "again.json", orders())
    health = client.health()
    assert health == {
        "workflow": "orders",
        "checksum": checksum(graph),
        "lease": 120,
        "auth": "off",
    }
    served = client.workflow()
    assert served["workflow"] == "orders"
    assert list(served["states"]) == ["draft", "review"]


def test_one_connection_serves_every_call(client: Client) -> None:
    client.health()
    first = client._connection._connection
    client.start("ORDER-1", ITEM)
    client.get("ORDER-1")
    assert first is not None
    assert client._connection._connection is first


# errors


def test_an_unknown_token_raises_not_found_with_its_code(client: Client) -> None:
    with pytest.raises(NotFound) as missing:
        client.get("NOPE")
    assert (missing.value.status, missing.value.code) == (404, "token_not_found")
    assert missing.value.message == "no token has the id 'NOPE'"
    assert isinstance(missing.value, Refused)
    assert isinstance(missing.value, ClientError)


def test_a_refusal_raises_refused_with_its_status_code_and_sentence(client: Client) -> None:
    client.start("ORDER-1", ITEM)
    client.cancel("ORDER-1")
    with pytest.raises(Refused) as refused:
        client.fire("ORDER-1", "submitted")
    assert (refused.value.status, refused.value.code) == (409, "token_not_active")
    assert str(refused.value) == "token 'ORDER-1' is cancelled; it takes no events"
    assert not isinstance(refused.value, NotFound)


def test_a_silent_control_plane_raises_unreachable(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with Client(url) as client, pytest.raises(Unreachable) as silent:
        client.health()
    assert str(silent.value) == f"cannot reach the control plane at {url} (Connection refused)"


def test_a_control_plane_that_never_answers_raises_unreachable_after_the_timeout() -> None:
    with silent_control_plane() as url, Client(url, timeout=0.5) as client:
        began = time.monotonic()
        with pytest.raises(Unreachable) as silent:
            client.get("ORDER-1")
        waited = time.monotonic() - began
    assert str(silent.value) == f"the control plane at {url} did not answer within 0.5 seconds"
    assert 0.5 <= waited < 5


def test_a_url_that_is_not_http_raises_client_error() -> None:
    with pytest.raises(ClientError) as wrong:
        Client("cp.internal:8080")
    assert str(wrong.value) == "'cp.internal:8080' is not an http:// or https:// URL"


class Busy(Engine):
    """An engine whose database is busy for the first `busy_answers` reads of a token."""

    busy_answers = 0
    calls = 0

    def get(self, token: str) -> Any:
        type(self).calls += 1
        if type(self).calls <= self.busy_answers:
            raise DatabaseBusy("the database is busy; try again")
        return super().get(token)


@contextmanager
def serve_busy(folder: Path, answers: int) -> Iterator[ServedEngine]:
    """Serve `orders` on SQLite through an engine that is busy for its first `answers` reads."""
    kind = type("BusyFor", (Busy,), {"busy_answers": answers, "calls": 0})
    with open_backend("sqlite", folder) as backend, serving(build_engine(backend, kind)) as served:
        yield served


def test_a_busy_database_is_asked_again_until_it_answers(tmp_path: Path) -> None:
    with serve_busy(tmp_path, BUSY_RETRIES) as served:
        with Client(served.url) as client:
            client.start("ORDER-1", ITEM)
            assert client.get("ORDER-1")["token"] == "ORDER-1"
        assert type(served.engine).calls == BUSY_RETRIES + 1


def test_a_database_that_stays_busy_raises_refused_with_database_busy(tmp_path: Path) -> None:
    with serve_busy(tmp_path, 100) as served:
        with Client(served.url) as client, pytest.raises(Refused) as busy:
            client.get("ORDER-1")
        assert (busy.value.status, busy.value.code) == (503, "database_busy")
        assert type(served.engine).calls == BUSY_RETRIES + 1
