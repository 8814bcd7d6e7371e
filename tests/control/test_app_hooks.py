"""The app's one door to its server (`http/hooks.py`): a fake `Hooks` given to `create_app`
sees every claim that waits and every stream, with no server and no socket."""

from __future__ import annotations

from typing import Any

import falcon.testing
import pytest

from stateous.control.engine import Engine
from stateous.control.http.app import create_app
from stateous.control.http.hooks import Environ
from stateous.control.http.stream_sockets import Outlet
from stateous.control.waiting_claims import Waiter
from tests.control.conftest import build_engine
from tests.control.support import Backend

CLAIM = {"supervisor": "box-1", "states": ["review"], "wait": 5}


class FakeHooks:
    """Hooks that park every claim that may wait, resume the one named, adopt no stream."""

    def __init__(self) -> None:
        self.parked: list[tuple[str, Waiter]] = []
        self.adopted: list[str] = []
        self.resuming: Waiter | None = None

    def adopt(self, environ: Environ) -> Outlet | None:
        self.adopted.append(environ["PATH_INFO"])
        return None

    def park(self, environ: Environ, waiter: Waiter) -> bool:
        self.parked.append((environ["PATH_INFO"], waiter))
        return True

    def resumed(self, environ: Environ) -> Waiter | None:
        return self.resuming


@pytest.fixture
def engine(backend: Backend) -> Engine:
    engine = build_engine(backend)
    engine.start("ORDER-1", {"title": "first"})
    return engine


def post(client: falcon.testing.TestClient, path: str, body: dict[str, Any]) -> Any:
    return client.simulate_post(path, json=body)


def test_a_claim_that_may_wait_is_parked_through_the_hooks_and_answered_when_resumed(
    engine: Engine,
) -> None:
    hooks = FakeHooks()
    client = falcon.testing.TestClient(create_app(engine, hooks=hooks))

    parked = post(client, "/tasks/claim", CLAIM)

    assert (parked.status_code, parked.content) == (200, b"")  # nothing answered yet
    [(path, waiter)] = hooks.parked
    assert path == "/tasks/claim" and waiter.states == {"review"}
    post(client, "/tokens/ORDER-1/events/submitted", {})
    assert waiter.woken
    hooks.resuming = waiter

    granted = post(client, "/tasks/claim", CLAIM)

    assert granted.status_code == 200
    assert (granted.json["token"], granted.json["state"]) == ("ORDER-1", "review")
    assert len(hooks.parked) == 1


def test_an_app_made_without_hooks_answers_a_claim_that_may_wait_at_once(
    engine: Engine,
) -> None:
    client = falcon.testing.TestClient(create_app(engine))

    answered = post(client, "/tasks/claim", CLAIM)

    assert (answered.status_code, answered.content) == (204, b"")


def test_a_stream_asks_the_hooks_for_its_socket_and_ends_when_none_is_given(
    engine: Engine,
) -> None:
    hooks = FakeHooks()
    client = falcon.testing.TestClient(create_app(engine, hooks=hooks))

    streamed = client.simulate_get("/stream")

    assert streamed.status_code == 200
    assert streamed.headers["content-type"] == "text/event-stream"
    assert (hooks.adopted, streamed.content) == (["/stream"], b"")
