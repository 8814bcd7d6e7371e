"""A spend counts once, over real HTTP on both backends: a spend sent again with its key
is a duplicate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.control.conftest import Served, serving
from tests.control.support import Backend, plane_for
from tests.control.test_budgets import claim, entries, fanout, start, token


@pytest.fixture
def routed(backend: Backend) -> Iterator[Served]:
    with serving(plane_for(fanout(routed=True), backend).engine) as served:
        yield served


@pytest.fixture
def unrouted(backend: Backend) -> Iterator[Served]:
    with serving(plane_for(fanout(routed=False), backend).engine) as served:
        yield served


def test_a_spend_sent_again_with_its_key_counts_once(routed: Served) -> None:
    assert start(routed, "T", {"usd": 5})[0] == 201
    grant = claim(routed)
    assert grant is not None
    body = {"spent": {"usd": 1.5}, "supervisor": "box", "attempt": 1, "key": "spend-1"}
    path = f"/tasks/{grant['task']}/spend"
    assert routed.request("POST", path, body)[0] == 204
    status, _, again = routed.request("POST", path, body)
    assert (status, again) == (200, {"duplicate": True})
    assert routed.request("POST", path, {**body, "key": "spend-2"})[0] == 204
    status, _, refused = routed.request("POST", path, {**body, "key": ""})
    assert (status, refused["code"]) == (422, "invalid_spend")
    unkeyed = {"spent": {"usd": 1}, "supervisor": "box", "attempt": 1}
    assert routed.request("POST", path, unkeyed)[0] == 204
    assert routed.request("POST", path, unkeyed)[0] == 204
    assert len(entries(routed, grant["token"], "spent")) == 4
    assert token(routed, "T")["spent"]["tree"] == {"usd": 5.0}
