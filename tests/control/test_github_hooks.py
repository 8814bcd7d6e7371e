"""GitHub webhooks end to end over real HTTP on both databases: deliveries signed as GitHub
signs them (HMAC-SHA256 of the exact body, `X-Hub-Signature-256`), named by
`X-GitHub-Event` and `X-GitHub-Delivery`, posted to `POST /hooks/{name}` of a real compiled
workflow whose event models take GitHub's sub-objects; and a signed start on `POST /tokens`."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.credentials import add_credential
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from stateous.control.http.access import Access, Hook, served_hosts
from stateous.control.http.app import Guard
from stateous.model.graph_file import dump
from stateous.model.vocabulary import Role
from tests.control.conftest import Served, serving
from tests.control.support import Backend

PR_KEY = "stq_the-pull-request-key"
PUSH_KEY = "stq_the-push-key"
START_KEY = "stq_the-start-key"


class Change(msgspec.Struct):
    """The context of a pull request's token."""

    title: str = ""
    number: int = 0


class PullRequest(msgspec.Struct):
    """What the workflow reads of GitHub's `pull_request` object."""

    number: int
    title: str
    state: str


class Push(msgspec.Struct):
    """What the workflow reads of GitHub's `push` body."""

    ref: str
    after: str


def reviews() -> Workflow:
    """A branch's token: open until its pull request changes, ended by a push."""
    flow = Workflow("reviews", context=Change)
    opened = flow.state("open")
    changed = flow.state("changed")
    pr_changed = flow.event("pr_changed", payload=PullRequest)
    pushed = flow.event("pushed", payload=Push)
    flow.transition(START, opened)
    flow.transition(opened, changed, on=pr_changed)
    flow.transition(changed, opened, on=pr_changed)
    flow.transition(opened, END, on=pushed)
    flow.transition(changed, END, on=pushed)
    return flow


def pull_request_body(action: str, number: int = 7, branch: str = "feature-x") -> dict[str, Any]:
    """A `pull_request` delivery in GitHub's shape (the fields that matter, and some others)."""
    return {
        "action": action,
        "number": number,
        "pull_request": {
            "url": f"https://api.github.com/repos/acme/site/pulls/{number}",
            "number": number,
            "state": "open",
            "title": "Make the header blue",
            "user": {"login": "octocat", "id": 1},
            "head": {"ref": branch, "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
            "base": {"ref": "main", "sha": "9049f1265b7d61be4a8904a9a27120d2064dab3b"},
        },
        "repository": {"name": "site", "full_name": "acme/site"},
        "sender": {"login": "octocat", "id": 1},
    }


def push_body() -> dict[str, Any]:
    """A `push` delivery in GitHub's shape."""
    return {
        "ref": "refs/heads/main",
        "before": "9049f1265b7d61be4a8904a9a27120d2064dab3b",
        "after": "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c",
        "repository": {"name": "site", "full_name": "acme/site"},
        "pusher": {"name": "octocat"},
        "commits": [{"id": "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c", "message": "Ship"}],
    }


def signed(body: bytes, key: str) -> str:
    """The signature GitHub sends: the body's HMAC-SHA256 under the webhook's secret."""
    return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class Plane:
    served: Served
    operator: str

    def deliver(
        self,
        hook: str,
        kind: str,
        body: dict[str, Any],
        key: str,
        delivery: str = "d-1",
        path: str | None = None,
    ) -> tuple[int, Any]:
        """Post a delivery as GitHub does: no `Authorization`, the body signed."""
        data = msgspec.json.encode(body)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/044aadd",
            "X-GitHub-Event": kind,
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": signed(data, key),
        }
        status, _, answer = self.served.request(
            "POST", path or f"/hooks/{hook}", headers=headers, raw=data
        )
        return status, answer

    def ask(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.operator}"}
        status, _, answer = self.served.request(method, path, body, headers)
        return status, answer

    def history(self, token: str) -> list[tuple[str, dict[str, Any]]]:
        status, answer = self.ask("GET", f"/tokens/{token}/history")
        assert status == 200, answer
        return [(entry["kind"], entry["data"]) for entry in answer]

    def tokens(self) -> list[str]:
        return sorted(row["token"] for row in self.ask("GET", "/tokens")[1])


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    path = backend.folder / "reviews.json"
    path.write_bytes(dump(compile_workflow(reviews())))
    engine = Engine(Graph.load(path), backend.store(), lease=120)
    operator = add_credential(engine.store, "ops", Role.OPERATOR)
    add_credential(
        engine.store,
        "gh-pr",
        Role.WEBHOOK,
        may_start=True,
        hmac_key=PR_KEY,
        hook=Hook(
            kinds={"pull_request": "pr_changed"},
            token_from="pull_request.head.ref",
            payload_from="pull_request",
            start_context_from="pull_request",
        ),
    )
    add_credential(
        engine.store,
        "gh-push",
        Role.WEBHOOK,
        hmac_key=PUSH_KEY,
        hook=Hook(kinds={"push": "pushed"}, token_from="=site"),
    )
    add_credential(
        engine.store, "starter", Role.WEBHOOK, events=["pushed"], may_start=True, hmac_key=START_KEY
    )
    guard = Guard(Access(engine.store), served_hosts("127.0.0.1", []))
    with serving(engine, guard=guard) as served:
        yield Plane(served, operator)


def test_a_pull_request_starts_its_branch_token_then_moves_it_once_per_delivery(
    plane: Plane,
) -> None:
    status, answer = plane.deliver("gh-pr", "pull_request", pull_request_body("opened"), PR_KEY)
    assert status == 201, answer
    assert answer == {
        "token": "feature-x",
        "state": "open",
        "status": "active",
        "kind": "pull_request",
        "event": None,
        "started": True,
        "fired": False,
        "duplicate": False,
    }
    kind, data = plane.history("feature-x")[0]
    assert (kind, data["by"]) == ("started", "gh-pr")
    # The sub-object is the context, checked as any context: the model's fields, and the rest.
    assert data["context"] == pull_request_body("opened")["pull_request"]

    body = pull_request_body("synchronize")
    status, answer = plane.deliver("gh-pr", "pull_request", body, PR_KEY, delivery="d-2")
    assert status == 200, answer
    assert answer == {
        "token": "feature-x",
        "state": "changed",
        "status": "active",
        "kind": "pull_request",
        "event": "pr_changed",
        "started": False,
        "fired": True,
        "duplicate": False,
    }
    again = plane.deliver("gh-pr", "pull_request", body, PR_KEY, delivery="d-2")
    assert again[0] == 200 and again[1]["duplicate"] is True and again[1]["fired"] is False
    # A redelivery of the start is a duplicate too, not a fire.
    first = plane.deliver("gh-pr", "pull_request", pull_request_body("opened"), PR_KEY)
    assert first[0] == 200 and first[1]["duplicate"] is True
    accepted = [data for kind, data in plane.history("feature-x") if kind == "event_accepted"]
    assert [data["event"] for data in accepted] == ["__started__", "pr_changed"]
    assert accepted[-1]["payload"]["number"] == 7
    assert accepted[-1]["by"] == "gh-pr"
    assert plane.ask("GET", "/tokens/feature-x")[1]["state"] == "changed"


def test_a_push_fires_on_a_fixed_token_with_the_whole_body_as_payload(plane: Plane) -> None:
    assert plane.ask("POST", "/tokens", {"token": "site", "context": {}})[0] == 201
    status, answer = plane.deliver("gh-push", "push", push_body(), PUSH_KEY)
    assert status == 200, answer
    assert (answer["token"], answer["status"], answer["event"]) == ("site", "completed", "pushed")
    assert "context" not in answer
    accepted = [data for kind, data in plane.history("site") if kind == "event_accepted"]
    assert accepted[-1]["payload"]["after"] == push_body()["after"]


def test_a_hook_that_may_not_start_is_refused_a_token_that_does_not_exist(plane: Plane) -> None:
    status, answer = plane.deliver("gh-push", "push", push_body(), PUSH_KEY)
    assert (status, answer["code"]) == (404, "token_not_found")
    assert plane.tokens() == []


def test_a_ping_is_answered_pong_and_changes_nothing(plane: Plane) -> None:
    ping = {"zen": "Keep it logically awesome.", "hook_id": 42, "hook": {"type": "Repository"}}
    for hook, key in (("gh-pr", PR_KEY), ("gh-push", PUSH_KEY)):
        status, answer = plane.deliver(hook, "ping", ping, key)
        assert (status, answer) == (200, {"pong": True})
    assert plane.tokens() == []


def test_a_kind_not_listed_is_ignored_counted_and_kept_in_no_token(plane: Plane) -> None:
    plane.deliver("gh-pr", "pull_request", pull_request_body("opened"), PR_KEY)
    issue = {"action": "opened", "issue": {"number": 3}, "pull_request": {"head": {"ref": "x"}}}
    for delivery in ("d-7", "d-8"):
        status, answer = plane.deliver("gh-pr", "issues", issue, PR_KEY, delivery=delivery)
        assert status == 202, answer
        assert answer["ignored"] == "issues"
        assert "gh-pr" in answer["reason"] and "issues" in answer["reason"]
    assert plane.tokens() == ["feature-x"]
    assert "issues" not in str(plane.history("feature-x"))
    status, _, text = plane.served.request(
        "GET", "/metrics", headers={"Authorization": f"Bearer {plane.operator}"}
    )
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text.decode())
        for sample in family.samples
    }
    ignored = "stateous_webhook_deliveries_ignored_total"
    assert samples[(ignored, (("kind", "issues"), ("webhook", "gh-pr")))] == 2


def test_a_bad_signature_or_an_unknown_hook_is_refused(plane: Plane) -> None:
    body = pull_request_body("opened")
    for hook, key in (("gh-pr", "stq_another-key"), ("gh-pr", PUSH_KEY), ("nobody", PR_KEY)):
        status, answer = plane.deliver(hook, "pull_request", body, key)
        assert (status, answer["code"]) == (401, "unauthorized"), (hook, answer)
    # A delivery with the operator's secret and no signature names no hook either.
    status, _, answer = plane.served.request(
        "POST",
        "/hooks/gh-pr",
        body,
        {"Authorization": f"Bearer {plane.operator}", "X-GitHub-Event": "pull_request"},
    )
    assert (status, answer["code"]) == (401, "unauthorized")
    assert plane.tokens() == []


def test_a_delivery_without_the_mapped_field_is_refused_and_changes_nothing(plane: Plane) -> None:
    body = pull_request_body("opened")
    del body["pull_request"]["head"]
    status, answer = plane.deliver("gh-pr", "pull_request", body, PR_KEY)
    assert (status, answer["code"]) == (422, "invalid_delivery")
    assert "pull_request.head.ref" in answer["error"]
    body = pull_request_body("opened")
    body["pull_request"]["head"]["ref"] = 12
    status, answer = plane.deliver("gh-pr", "pull_request", body, PR_KEY)
    assert (status, answer["code"]) == (422, "invalid_delivery")
    status, answer = plane.deliver("gh-pr", "", body, PR_KEY)
    assert (status, answer["code"]) == (422, "invalid_delivery")
    assert plane.tokens() == []


def test_a_payload_that_does_not_fit_the_event_is_refused(plane: Plane) -> None:
    plane.deliver("gh-pr", "pull_request", pull_request_body("opened"), PR_KEY)
    body = pull_request_body("synchronize")
    body["pull_request"]["number"] = "seven"
    status, answer = plane.deliver("gh-pr", "pull_request", body, PR_KEY, delivery="d-2")
    assert (status, answer["code"]) == (422, "invalid_payload")
    assert plane.ask("GET", "/tokens/feature-x")[1]["state"] == "open"


def test_a_signed_start_on_post_tokens_names_its_webhook(plane: Plane) -> None:
    status, answer = plane.deliver(
        "", "push", {"token": "ORDER-9", "context": {"title": "t"}}, START_KEY, path="/tokens"
    )
    assert status == 201, answer
    assert answer["token"] == "ORDER-9" and "context" not in answer
    assert plane.history("ORDER-9")[0][1]["by"] == "starter"
    # The key of a webhook that may not start is not tried for a start.
    status, answer = plane.deliver(
        "", "push", {"token": "ORDER-10", "context": {}}, PUSH_KEY, path="/tokens"
    )
    assert (status, answer["code"]) == (401, "unauthorized")
