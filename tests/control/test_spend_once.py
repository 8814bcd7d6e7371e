"""A spend counts once and a tree over its budget always meets `over_budget`, over real
HTTP on both backends: a spend sent again with its key is a duplicate; a tree that went
over while paused meets it at its resume; a budget lowered below what the tree spent
meets it at once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.control.conftest import Served, serving
from tests.control.support import Backend, plane_for
from tests.control.test_budgets import claim, claim_all, entries, fanout, report, start, token


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


def test_a_tree_that_went_over_while_paused_meets_over_budget_at_its_resume(
    routed: Served,
) -> None:
    assert start(routed, "T", {"usd": 1})[0] == 201
    grants = claim_all(routed)
    assert routed.request("POST", "/tokens/T/pause", {})[0] == 200
    assert report(routed, grants[0], spent={"usd": 1.2})[0] == 200
    assert token(routed, "T")["status"] == "paused"
    assert routed.request("POST", "/tokens/T/resume", {})[0] == 200
    shown = token(routed, "T")
    assert (shown["state"], shown["status"]) == ("over", "active")
    over = entries(routed, "T", "over_budget")
    assert over == [{"reason": "the tree spent usd=1.2 of its budget of usd=1", "routed": True}]
    assert routed.request("POST", "/tokens/T/pause", {})[0] == 200
    assert routed.request("POST", "/tokens/T/resume", {})[0] == 200
    assert len(entries(routed, "T", "over_budget")) == 1


def test_a_budget_lowered_below_the_spend_is_over_budget_at_once(unrouted: Served) -> None:
    assert start(unrouted, "T", {"usd": 2})[0] == 201
    grant = claim(unrouted)
    assert grant is not None
    assert report(unrouted, grant, spent={"usd": 0.5})[0] == 200
    status, _, lowered = unrouted.request("POST", "/tokens/T/budget", {"budget": {"usd": 0.4}})
    assert (status, lowered["over"]) == (200, True)
    assert token(unrouted, "T")["status"] == "paused"
    assert entries(unrouted, "T", "over_budget") == [
        {"reason": "the tree spent usd=0.5 of its budget of usd=0.4", "routed": False}
    ]
    assert claim(unrouted) is None
