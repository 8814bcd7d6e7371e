"""What one credential may do to the work of another, over real HTTP on both databases.

A supervisor credential is bound to a supervisor's name (or a prefix of names): claims,
heartbeats, reports, notes and memory writes under another name are refused, and a task
that another supervisor holds is refused without naming that supervisor or its attempt.
A webhook is answered what it needs of a token, never the token's context.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from stateous.control.credentials import add_credential, digest, new_secret
from stateous.control.http.access import Access, served_hosts
from stateous.control.http.app import Guard
from stateous.control.store import CredentialRow, Tx
from stateous.model.vocabulary import Role
from tests.control.conftest import build_engine, serving
from tests.control.support import Backend
from tests.control.test_access import Plane, entries, started

OWNER, OTHER = "build-box-7", "build-box-8"


LEGACY = new_secret()


def unbound(tx: Tx) -> None:
    """A supervisor credential as a database made before bindings holds it."""
    tx.put_credential(
        CredentialRow("legacy", "supervisor", None, False, None, digest(LEGACY), tx.now)
    )


@pytest.fixture
def fleet(backend: Backend) -> Iterator[Plane]:
    engine = build_engine(backend)
    store = engine.store
    secrets = {
        "ops": add_credential(store, "ops", Role.OPERATOR),
        "box-7": add_credential(store, "box-7", Role.SUPERVISOR, supervisor=OWNER),
        "box-8": add_credential(store, "box-8", Role.SUPERVISOR, supervisor=OTHER),
        OWNER: add_credential(store, OWNER, Role.SUPERVISOR),
        "pool": add_credential(store, "pool", Role.SUPERVISOR, supervisor_prefix="pool-"),
        "starter": add_credential(
            store, "starter", Role.WEBHOOK, events=["submitted"], may_start=True
        ),
    }
    guard = Guard(Access(store), served_hosts("127.0.0.1", []))
    with serving(engine, guard=guard) as served:
        yield Plane(served, secrets)


def claimed(fleet: Plane, who: str = "box-7", supervisor: str = OWNER) -> dict[str, Any]:
    """Start ORDER-1 and claim its `draft` task as `supervisor` with `who`'s credential."""
    started(fleet)
    body = {"supervisor": supervisor, "states": ["draft"]}
    status, grant = fleet.ask("POST", "/tasks/claim", body, who=who)
    assert status == 200, grant
    return grant


def tasks(fleet: Plane) -> list[dict[str, Any]]:
    status, answer = fleet.ask("GET", "/tasks", who="ops")
    assert status == 200, answer
    return [
        {key: row[key] for key in ("task", "status", "supervisor", "attempt")} for row in answer
    ]


def token(fleet: Plane) -> dict[str, Any]:
    status, answer = fleet.ask("GET", "/tokens/ORDER-1", who="ops")
    assert status == 200, answer
    return answer


def test_a_supervisor_credential_acts_only_under_its_own_name(fleet: Plane) -> None:
    started(fleet)
    before = entries(fleet, "ORDER-1")
    for path, body in [
        ("/tasks/claim", {"supervisor": OWNER, "states": ["draft"]}),
        ("/tasks/heartbeat", {"supervisor": OWNER, "tasks": [1]}),
        ("/tasks/1/report", {"kind": "failed", "supervisor": OWNER, "error": "x"}),
        ("/tasks/1/note", {"text": "hi", "supervisor": OWNER}),
    ]:
        status, answer = fleet.ask("POST", path, body, who="box-8")
        assert (status, answer["code"]) == (403, "forbidden"), (path, answer)
        assert "'box-8' acts only as supervisor 'build-box-8'" in answer["error"]
    status, answer = fleet.ask(
        "PUT", "/tasks/1/memory", {"key": "k", "value": 1, "supervisor": OWNER}, who="box-8"
    )
    assert (status, answer["code"]) == (403, "forbidden")
    assert tasks(fleet) == [{"task": 1, "status": "queued", "supervisor": None, "attempt": 0}]
    assert entries(fleet, "ORDER-1") == before


def test_a_credential_made_without_a_binding_is_bound_to_its_own_name(fleet: Plane) -> None:
    grant = claimed(fleet, who=OWNER, supervisor=OWNER)
    assert grant["task"] == 1
    body = {"supervisor": "build-box-9", "states": ["draft"]}
    status, answer = fleet.ask("POST", "/tasks/claim", body, who=OWNER)
    assert (status, answer["code"]) == (403, "forbidden")


def test_a_prefix_credential_acts_under_every_name_that_starts_with_it(fleet: Plane) -> None:
    started(fleet)
    status, grant = fleet.ask(
        "POST", "/tasks/claim", {"supervisor": "pool-3", "states": ["draft"]}, who="pool"
    )
    assert status == 200, grant
    for name in ("pool", "POOL-3", "build-pool-3"):
        status, answer = fleet.ask(
            "POST", "/tasks/heartbeat", {"supervisor": name, "tasks": [1]}, who="pool"
        )
        assert (status, answer["code"]) == (403, "forbidden"), name
        assert "acts only as supervisors whose names start with 'pool-'" in answer["error"]


def test_another_box_cannot_renew_write_or_report_into_a_task_it_does_not_hold(
    fleet: Plane,
) -> None:
    claimed(fleet)
    before = entries(fleet, "ORDER-1")
    held = tasks(fleet)

    status, answer = fleet.ask(
        "POST", "/tasks/heartbeat", {"supervisor": OTHER, "tasks": [1]}, who="box-8"
    )
    assert (status, answer) == (200, {"lost": [1]})
    refusals = [
        ("POST", "/tasks/1/note", {"text": "mine now", "supervisor": OTHER}),
        ("PUT", "/tasks/1/memory", {"key": "k", "value": 1, "supervisor": OTHER}),
        (
            "POST",
            "/tasks/1/report",
            {"kind": "event", "event": "submitted", "context": {"title": "stolen"}},
        ),
    ]
    refusals[2][2]["supervisor"] = OTHER
    for attempt in (None, 1, 2):
        for method, path, body in refusals:
            sent = body if attempt is None else {**body, "attempt": attempt}
            status, answer = fleet.ask(method, path, sent, who="box-8")
            assert (status, answer["code"]) == (409, "task_not_held"), (path, answer)
            assert OWNER not in answer["error"] and "attempt 1" not in answer["error"]
            if attempt != 2:
                assert answer["error"] == "task 1 is not held by supervisor 'build-box-8'"
    assert entries(fleet, "ORDER-1") == before
    assert tasks(fleet) == held
    assert token(fleet)["context"] == {"title": "t", "amount": 0}


def test_notes_and_memory_of_a_supervisor_credential_name_the_supervisor(fleet: Plane) -> None:
    claimed(fleet)
    for method, path, body in [
        ("POST", "/tasks/1/note", {"text": "hi"}),
        ("PUT", "/tasks/1/memory", {"key": "k", "value": 1}),
        ("POST", "/tasks/1/report", {"kind": "waiting"}),
    ]:
        status, answer = fleet.ask(method, path, body, who="box-7")
        assert (status, answer["code"]) == (403, "forbidden"), (path, answer)
        assert "names its supervisor" in answer["error"]
    status, _ = fleet.ask("POST", "/tasks/1/note", {"text": "hi", "supervisor": OWNER}, who="box-7")
    assert status == 204
    status, _ = fleet.ask(
        "PUT", "/tasks/1/memory", {"key": "k", "value": 1, "supervisor": OWNER}, who="box-7"
    )
    assert status == 204
    kinds = [(kind, data.get("text")) for kind, data in entries(fleet, "ORDER-1")]
    assert kinds[-2:] == [("note", "hi"), ("memory_set", None)]
    # An operator keeps full power: a note needs no supervisor's name.
    assert fleet.ask("POST", "/tasks/1/note", {"text": "from ops"}, who="ops")[0] == 204


def test_only_an_operator_reports_a_waiting_task_from_outside(fleet: Plane) -> None:
    claimed(fleet)
    body = {"kind": "waiting", "supervisor": OWNER}
    assert fleet.ask("POST", "/tasks/1/report", body, who="box-7")[0] == 200
    outcome = {"kind": "event", "event": "submitted"}
    status, answer = fleet.ask("POST", "/tasks/1/report", outcome, who="box-8")
    assert (status, answer["code"]) == (403, "forbidden")
    status, answer = fleet.ask(
        "POST", "/tasks/1/report", {**outcome, "supervisor": OTHER}, who="box-8"
    )
    assert (status, answer["code"]) == (409, "task_not_held")
    assert token(fleet)["state"] == "draft"
    status, answer = fleet.ask("POST", "/tasks/1/report", outcome, who="ops")
    assert status == 200 and answer["state"] == "review"


def test_a_refusal_never_names_the_holder_or_its_attempt(fleet: Plane) -> None:
    claimed(fleet)
    outcome = {"kind": "event", "event": "submitted"}
    for attempt in (None, 1, 2, 5):
        body = outcome if attempt is None else {**outcome, "attempt": attempt}
        status, answer = fleet.ask("POST", "/tasks/1/report", body, who="ops")
        assert status == 409, answer
        assert OWNER not in answer["error"]
        assert "attempt 1" not in answer["error"], answer
    status, answer = fleet.ask("POST", "/tasks/1/report", outcome, who="ops")
    assert answer["error"] == "task 1 is not waiting for an outcome from outside"


def test_an_unbound_credential_of_an_older_database_acts_as_before(fleet: Plane) -> None:
    fleet.served.engine.store.write(unbound)
    fleet.secrets["legacy"] = LEGACY
    grant = claimed(fleet, who="legacy", supervisor="anyone")
    assert fleet.ask("POST", "/tasks/1/note", {"text": "hi"}, who="legacy")[0] == 204
    body = {"supervisor": "anyone", "tasks": [grant["task"]]}
    assert fleet.ask("POST", "/tasks/heartbeat", body, who="legacy") == (200, {"lost": []})


def test_a_webhook_is_answered_a_token_without_its_context(fleet: Plane) -> None:
    body = {"token": "ORDER-1", "context": {"title": "secret plans"}}
    status, made = fleet.ask("POST", "/tokens", body, who="starter")
    assert status == 201, made
    assert "context" not in made
    assert made["token"] == "ORDER-1" and made["status"] == "active"
    status, again = fleet.ask("POST", "/tokens", {"token": "ORDER-1"}, who="starter")
    assert (status, again) == (200, made)

    key = {"Idempotency-Key": "delivery-1"}
    path = "/tokens/ORDER-1/events/submitted"
    status, fired = fleet.ask("POST", path, who="starter", headers=key)
    assert status == 200 and fired["state"] == "review" and "context" not in fired
    status, repeated = fleet.ask("POST", path, who="starter", headers=key)
    assert status == 200 and repeated["duplicate"] is True
    assert set(repeated["token"]) == {"token", "state", "status", "visit", "entered_at"}

    # An operator is answered the whole token, as documented.
    status, whole = fleet.ask("POST", "/tokens", {"token": "ORDER-1"}, who="ops")
    assert whole["context"] == {"title": "secret plans", "amount": 0}
    status, whole = fleet.ask("POST", path, who="ops", headers=key)
    assert whole["token"]["context"] == {"title": "secret plans", "amount": 0}
