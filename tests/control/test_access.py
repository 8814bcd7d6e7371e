"""Credentials and roles over real HTTP on both databases: the rule of every route, generated
from the API's own route table, bad headers, signed webhook deliveries, the credential named
in the ledger, and the browser's limits (Host, Origin, Content-Type, CORS preflights)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from stateous.control.credentials import add_credential, revoke_credential
from stateous.control.http.access import Access, Hook, served_hosts, served_origins
from stateous.control.http.app import Guard, create_app
from stateous.control.http.routes import ROUTES
from stateous.control.http.routing import RULES, paths
from stateous.model.vocabulary import Role
from tests.control.conftest import Served, build_engine, serving
from tests.control.raw import exchange, is_refusal, request_bytes
from tests.control.support import Backend

SUPERVISOR = "box"


@dataclass
class Plane:
    """A guarded control plane and the secrets of its credentials, by name."""

    served: Served
    secrets: dict[str, str]

    def ask(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        who: str | None = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> tuple[int, Any]:
        sent = dict(headers or {})
        if who is not None:
            sent["Authorization"] = f"Bearer {self.secrets[who]}"
        status, _, answer = self.served.request(method, path, body, sent, raw)
        return status, answer


ROLES = {
    "ops": (Role.OPERATOR, {}),
    "box": (Role.SUPERVISOR, {}),
    "hook": (Role.WEBHOOK, {"events": ["submitted"]}),
    "starter": (Role.WEBHOOK, {"events": ["submitted"], "may_start": True}),
    "signed": (Role.WEBHOOK, {"events": ["submitted"], "hmac_key": "stq_the-signing-key"}),
    "github": (
        Role.WEBHOOK,
        {"hmac_key": "stq_the-hook-key", "hook": Hook({"push": "submitted"}, "=ORDER-1")},
    ),
    "gone": (Role.OPERATOR, {}),
}


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    engine = build_engine(backend)
    secrets = {
        name: add_credential(engine.store, name, role, **options)  # type: ignore[arg-type]
        for name, (role, options) in ROLES.items()
    }
    revoke_credential(engine.store, "gone")
    allowed = ["proxy.example", "https://ops.example:8443"]
    guard = Guard(Access(engine.store), served_hosts("127.0.0.1", allowed), served_origins(allowed))
    with serving(engine, guard=guard) as served:
        yield Plane(served, secrets)


def started(plane: Plane, token: str = "ORDER-1") -> None:
    status, answer = plane.ask(
        "POST", "/tokens", {"token": token, "context": {"title": "t"}}, who="ops"
    )
    assert status == 201, answer


def entries(plane: Plane, token: str) -> list[tuple[str, dict[str, Any]]]:
    status, answer = plane.ask("GET", f"/tokens/{token}/history", who="ops")
    assert status == 200, answer
    return [(entry["kind"], entry["data"]) for entry in answer]


# the rule of every route, from the route table


def app_routes() -> list[tuple[str, str]]:
    app = create_app(engine=None)  # type: ignore[arg-type]
    found = []
    pending = list(app._router._roots)
    while pending:
        node = pending.pop()
        pending.extend(node.children or [])
        if node.resource is None:
            continue
        for method, responder in node.method_map.items():
            if "on_" in getattr(responder, "__name__", ""):
                found.append((method, node.uri_template))
    return sorted(found)


def test_every_route_of_the_api_has_a_rule_and_every_rule_a_route() -> None:
    routes = app_routes()
    assert len(routes) >= 18
    missing = [route for route in routes if route[0] != "HEAD" and route not in RULES]
    assert missing == []
    assert all(("GET", template) in RULES for method, template in routes if method == "HEAD")
    assert set(RULES) <= set(routes)


def test_the_route_table_declares_each_route_once_with_its_rule_and_its_responder() -> None:
    assert len({(route.method, route.path) for route in ROUTES}) == len(ROUTES) == len(RULES)
    for route in ROUTES:
        name = f"on_{route.method.lower()}" + (f"_{route.suffix}" if route.suffix else "")
        assert callable(getattr(route.resource, name, None)), (route.method, route.path)
    assert list(paths()) == list(dict.fromkeys(route.path for route in ROUTES))


#: A request that each route takes, with a body that fits it.
REQUESTS = {
    ("GET", "/health"): ("/health", None),
    ("GET", "/workflow"): ("/workflow", None),
    ("GET", "/workflow/layout"): ("/workflow/layout", None),
    ("GET", "/workflows"): ("/workflows", None),
    ("GET", "/ui/"): ("/ui/", None),
    ("GET", "/ui/{file}"): ("/ui/app.js", None),
    ("GET", "/openapi.json"): ("/openapi.json", None),
    ("GET", "/stats"): ("/stats", None),
    ("GET", "/metrics"): ("/metrics", None),
    ("GET", "/tokens"): ("/tokens", None),
    ("POST", "/tokens"): ("/tokens", {"token": "NEW-1", "context": {"title": "t"}}),
    ("GET", "/tokens/{token}"): ("/tokens/ORDER-1", None),
    ("GET", "/tokens/{token}/history"): ("/tokens/ORDER-1/history", None),
    # A stream of no token is refused once the caller passes: the answer does not stay open.
    ("GET", "/stream"): ("/stream?token=NO-SUCH-TOKEN", None),
    ("POST", "/tokens/{token}/events/{event}"): ("/tokens/ORDER-1/events/submitted", None),
    ("POST", "/tokens/{token}/pause"): ("/tokens/ORDER-1/pause", None),
    ("POST", "/tokens/{token}/resume"): ("/tokens/ORDER-1/resume", None),
    ("POST", "/tokens/{token}/cancel"): ("/tokens/ORDER-1/cancel", None),
    ("POST", "/tokens/{token}/budget"): ("/tokens/ORDER-1/budget", {"budget": {"usd": 1}}),
    ("POST", "/tokens/{token}/retry"): ("/tokens/ORDER-1/retry", None),
    ("POST", "/tokens/{token}/migrate"): ("/tokens/ORDER-1/migrate", None),
    ("POST", "/plans"): ("/plans", {"action": "pause", "where": "status=active"}),
    ("GET", "/plans/{plan}"): ("/plans/no-such-plan", None),
    ("POST", "/plans/{plan}/apply"): ("/plans/no-such-plan/apply", {"action": "pause"}),
    ("GET", "/schedules"): ("/schedules", None),
    ("POST", "/schedules"): ("/schedules", {"name": "nightly", "cron": "0 3 * * *"}),
    ("POST", "/schedules/{name}/pause"): ("/schedules/no-such/pause", None),
    ("POST", "/schedules/{name}/resume"): ("/schedules/no-such/resume", None),
    ("POST", "/schedules/{name}/remove"): ("/schedules/no-such/remove", None),
    ("GET", "/resources"): ("/resources", None),
    ("POST", "/resources/{name}/pause"): ("/resources/no-such/pause", None),
    ("POST", "/resources/{name}/resume"): ("/resources/no-such/resume", None),
    ("POST", "/resources/{name}/set"): ("/resources/no-such/set", {"slots": 2}),
    ("POST", "/resources/{name}/open"): ("/resources/no-such/open", {"key": "x"}),
    ("GET", "/tasks"): ("/tasks", None),
    ("GET", "/supervisors"): ("/supervisors", None),
    ("POST", "/tasks/claim"): ("/tasks/claim", {"supervisor": SUPERVISOR, "states": ["x"]}),
    ("POST", "/tasks/heartbeat"): ("/tasks/heartbeat", {"supervisor": SUPERVISOR, "tasks": []}),
    ("POST", "/tasks/{task}/report"): (
        "/tasks/999/report",
        {"kind": "waiting", "supervisor": SUPERVISOR},
    ),
    ("POST", "/tasks/{task}/note"): ("/tasks/999/note", {"text": "hi", "supervisor": SUPERVISOR}),
    ("POST", "/tasks/{task}/spend"): (
        "/tasks/999/spend",
        {"spent": {"usd": 1}, "supervisor": SUPERVISOR},
    ),
    ("PUT", "/tasks/{task}/memory"): (
        "/tasks/999/memory",
        {"key": "k", "value": 1, "supervisor": SUPERVISOR},
    ),
    ("POST", "/hooks/{name}"): ("/hooks/github", {"zen": "hi"}),
}
#: The routes that a signature alone opens: no role's `Authorization` is enough.
SIGNED_ONLY = {("POST", "/hooks/{name}")}
#: The routes open to every caller: the health check, and the dashboard's files.
OPEN = {("GET", "/health"), ("GET", "/ui/"), ("GET", "/ui/{file}")}
#: Who may call each route, by the route table's rules: every other caller is refused.
MAY = {
    "ops": set(RULES) - SIGNED_ONLY,
    "box": {
        *OPEN,
        ("GET", "/workflow"),
        ("GET", "/workflow/layout"),
        ("GET", "/workflows"),
        ("GET", "/openapi.json"),
        ("GET", "/metrics"),
        ("POST", "/tasks/claim"),
        ("POST", "/tasks/heartbeat"),
        ("POST", "/tasks/{task}/report"),
        ("POST", "/tasks/{task}/note"),
        ("POST", "/tasks/{task}/spend"),
        ("PUT", "/tasks/{task}/memory"),
    },
    "hook": {*OPEN, ("POST", "/tokens/{token}/events/{event}")},
    "starter": {
        *OPEN,
        ("POST", "/tokens/{token}/events/{event}"),
        ("POST", "/tokens"),
    },
}


def test_each_route_asks_the_rule_of_the_route_table(plane: Plane) -> None:
    assert set(REQUESTS) == set(RULES)
    started(plane)
    for route, (path, body) in REQUESTS.items():
        method = route[0]
        for who, allowed in MAY.items():
            status, answer = plane.ask(method, path, body, who=who)
            if route in allowed:
                assert status not in (401, 403), (who, route, answer)
            elif route in SIGNED_ONLY:
                assert (status, answer["code"]) == (401, "unauthorized"), (who, route, answer)
            else:
                assert (status, answer["code"]) == (403, "forbidden"), (who, route, answer)
        status, answer = plane.ask(method, path, body)
        if route in OPEN:
            assert status == 200
        else:
            assert (status, answer["code"]) == (401, "unauthorized"), (route, answer)
        head = plane.served.request("HEAD", path) if method == "GET" else None
        if head is not None and route not in OPEN:
            assert head[0] == 401
    ping = {"X-GitHub-Event": "ping", **signed_headers(b"{}", "stq_the-hook-key")}
    assert plane.ask("POST", "/hooks/github", headers=ping, raw=b"{}") == (200, {"pong": True})


def test_head_on_a_path_that_takes_no_get_is_refused_with_405(plane: Plane) -> None:
    started(plane)
    before = plane.ask("GET", "/tokens/ORDER-1/history", who="ops")
    for (_, template), (path, _) in REQUESTS.items():
        if ("GET", template) not in RULES:
            assert plane.served.request("HEAD", path)[0] == 405, path
            assert plane.ask("HEAD", path, who="ops")[0] == 405, path
    assert plane.ask("GET", "/tokens/ORDER-1/history", who="ops") == before


def test_a_webhook_fires_only_its_own_events(plane: Plane) -> None:
    started(plane)
    status, answer = plane.ask("POST", "/tokens/ORDER-1/events/reviewed", who="hook")
    assert (status, answer["code"]) == (403, "forbidden")
    assert "may not fire 'reviewed'" in answer["error"]
    assert plane.ask("POST", "/tokens/ORDER-1/events/submitted", who="hook")[0] == 200


BAD_HEADERS = {
    "no header": None,
    "Bearer alone": "Bearer",
    "Bearer and a space": "Bearer ",
    "another scheme": "Basic dXNlcjpwYXNz",
    "a secret not of ours": "Bearer abc",
    "a non-ASCII secret": "Bearer stq_\u00e9t\u00e9",
    "a secret of 10,000 characters": "Bearer stq_" + "x" * 10_000,
    "two secrets": "Bearer stq_one, Bearer stq_two",
    "an unknown secret": "Bearer stq_" + "A" * 43,
}


@pytest.mark.parametrize("case", list(BAD_HEADERS))
def test_a_bad_or_missing_credential_is_refused_and_changes_nothing(
    plane: Plane, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    started(plane)
    before = entries(plane, "ORDER-1")
    header = BAD_HEADERS[case]
    headers = {} if header is None else {"Authorization": header}
    with caplog.at_level(logging.INFO):
        status, answer = plane.ask("POST", "/tokens/ORDER-1/events/submitted", headers=headers)
    assert (status, answer["code"]) == (401, "unauthorized")
    assert "stq_" not in answer["error"]
    assert entries(plane, "ORDER-1") == before
    assert not any(header and header[7:20] in record.getMessage() for record in caplog.records)


def test_a_revoked_credential_is_refused_at_once(plane: Plane) -> None:
    started(plane)
    status, answer = plane.ask("GET", "/tokens/ORDER-1", who="gone")
    assert (status, answer["code"]) == (401, "unauthorized")
    assert plane.ask("GET", "/tokens/ORDER-1", who="box")[0] == 403
    revoke_credential(plane.served.engine.store, "box")
    status, answer = plane.ask(
        "POST", "/tasks/heartbeat", {"supervisor": "box", "tasks": []}, who="box"
    )
    assert (status, answer["code"]) == (401, "unauthorized")


def test_the_ledger_names_the_credential_of_each_change_from_outside(plane: Plane) -> None:
    started(plane)
    plane.ask("POST", "/tokens/ORDER-1/events/submitted", who="hook")
    plane.ask("POST", "/tokens/ORDER-1/pause", who="ops")
    kinds = entries(plane, "ORDER-1")
    assert kinds[0] == ("started", {"context": {"title": "t", "amount": 0}, "by": "ops"})
    accepted = [data for kind, data in kinds if kind == "event_accepted"]
    assert accepted[-1]["by"] == "hook"
    assert [data.get("by") for kind, data in kinds if kind == "paused"] == ["ops"]
    # only the first entry of a change names it
    assert sum(1 for _, data in kinds if data.get("by") == "hook") == 1


# signed webhook deliveries, as GitHub sends them


def signature(body: bytes, key: str = "stq_the-signing-key") -> str:
    return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def signed_headers(body: bytes, key: str) -> dict[str, str]:
    return {"X-Hub-Signature-256": signature(body, key), "Content-Type": "application/json"}


def test_a_signed_delivery_applies_once_across_a_redelivery(plane: Plane) -> None:
    started(plane)
    body = msgspec.json.encode({})
    delivery = {
        "X-Hub-Signature-256": signature(body),
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "Content-Type": "application/json",
    }
    first = plane.ask("POST", "/tokens/ORDER-1/events/submitted", headers=delivery, raw=body)
    again = plane.ask("POST", "/tokens/ORDER-1/events/submitted", headers=delivery, raw=body)
    assert first[0] == 200 and first[1]["state"] == "review"
    assert again[0] == 200 and again[1]["duplicate"] is True
    accepted = [data for kind, data in entries(plane, "ORDER-1") if kind == "event_accepted"]
    assert [data["event"] for data in accepted] == ["__started__", "submitted"]
    assert accepted[-1]["by"] == "signed"


@pytest.mark.parametrize("header", ["X-Hub-Signature-256", "X-Stateous-Signature"])
def test_a_wrong_signature_is_refused(plane: Plane, header: str) -> None:
    started(plane)
    body = msgspec.json.encode({})
    wrong = {header: signature(body, "stq_another-key"), "Content-Type": "application/json"}
    status, answer = plane.ask("POST", "/tokens/ORDER-1/events/submitted", headers=wrong, raw=body)
    assert (status, answer["code"]) == (401, "unauthorized")
    signed_other_body = {header: signature(b'{"x": 1}')}
    status, _ = plane.ask(
        "POST", "/tokens/ORDER-1/events/submitted", headers=signed_other_body, raw=body
    )
    assert status == 401
    assert plane.ask("GET", "/tokens/ORDER-1", who="ops")[1]["state"] == "draft"


def test_a_signed_delivery_of_an_event_its_webhook_may_not_fire_matches_no_key(
    plane: Plane,
) -> None:
    # Only the keys of the webhooks that may fire the event are tried: the key of
    # "signed" (made for `submitted`) is not tried for `remind`.
    started(plane)
    body = b"{}"
    headers = {"X-Hub-Signature-256": signature(body), "Content-Type": "application/json"}
    status, answer = plane.ask("POST", "/tokens/ORDER-1/events/remind", headers=headers, raw=body)
    assert (status, answer) == (
        401,
        {"error": "the delivery's signature matches no webhook's key", "code": "unauthorized"},
    )
    assert [kind for kind, _ in entries(plane, "ORDER-1")][-1] == "task_queued"


def test_a_signed_webhook_must_sign_even_with_its_secret(plane: Plane) -> None:
    started(plane)
    status, answer = plane.ask("POST", "/tokens/ORDER-1/events/submitted", who="signed")
    assert (status, answer["code"]) == (401, "unauthorized")
    body = b"{}"
    status, _ = plane.ask(
        "POST",
        "/tokens/ORDER-1/events/submitted",
        who="signed",
        headers={"X-Stateous-Signature": signature(body)},
        raw=body,
    )
    assert status == 200


# what a web page cannot make a browser do


def test_a_body_that_is_not_json_by_its_content_type_is_refused(plane: Plane) -> None:
    started(plane)
    form = {"Content-Type": "text/plain", **auth(plane)}
    status, answer = plane.ask("POST", "/tokens/ORDER-1/events/submitted", headers=form, raw=b"{}")
    assert (status, answer["code"]) == (415, "bad_request")
    assert plane.ask("GET", "/tokens/ORDER-1", who="ops")[1]["state"] == "draft"
    typed = {"Content-Type": "application/json; charset=utf-8", **auth(plane)}
    assert plane.ask("POST", "/tokens/ORDER-1/events/submitted", headers=typed, raw=b"{}")[0] == 200


def auth(plane: Plane) -> dict[str, str]:
    return {"Authorization": f"Bearer {plane.secrets['ops']}"}


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"Host": "evil.example"}, False),
        ({"Host": "localhost:8080"}, True),
        ({"Host": "proxy.example"}, True),
        ({"Host": "ops.example:8443"}, True),
        ({"Host": "10.1.2.3:8080"}, True),
        ({"Origin": "https://evil.example"}, False),
        ({"Origin": "null"}, False),
        # The control plane's own pages, by the address the request was sent to.
        ({"Origin": "http://127.0.0.1:{port}"}, True),
        ({"Host": "localhost:{port}", "Origin": "http://localhost:{port}"}, True),
        ({"Host": "10.1.2.3:8080", "Origin": "http://10.1.2.3:8080"}, True),
        # A page of another port or another address, even one written in digits.
        ({"Origin": "http://127.0.0.1:8080"}, False),
        ({"Origin": "https://127.0.0.1:{port}"}, False),
        ({"Origin": "http://10.1.2.3:{port}"}, False),
        ({"Origin": "http://localhost:{port}"}, False),
        # A proxy's names: a name alone on its default ports, an origin exactly.
        ({"Origin": "https://proxy.example"}, True),
        ({"Origin": "http://proxy.example"}, True),
        ({"Origin": "https://proxy.example:8443"}, False),
        ({"Origin": "https://ops.example:8443"}, True),
        ({"Origin": "https://ops.example"}, False),
        ({"Origin": "http://ops.example:8443"}, False),
    ],
)
def test_a_foreign_host_or_origin_is_refused(
    plane: Plane, headers: dict[str, str], allowed: bool
) -> None:
    sent = {name: value.format(port=plane.served.port) for name, value in headers.items()}
    status, answer = plane.ask("GET", "/tokens", headers={**sent, **auth(plane)})
    if allowed:
        assert status == 200, answer
    else:
        assert (status, answer["code"]) == (403, "forbidden")


def test_a_page_of_another_port_cannot_steer_a_token(plane: Plane) -> None:
    started(plane)
    other = {"Origin": "http://127.0.0.1:3000", **auth(plane)}
    status, answer = plane.ask("POST", "/tokens/ORDER-1/cancel", {}, headers=other)
    assert (status, answer["code"]) == (403, "forbidden")
    assert "http://127.0.0.1:3000" in answer["error"]
    assert plane.ask("GET", "/tokens/ORDER-1", who="ops")[1]["status"] == "active"


def test_a_change_that_a_browser_sends_from_another_site_is_refused(plane: Plane) -> None:
    started(plane)
    cross = {"Sec-Fetch-Site": "cross-site", **auth(plane)}
    status, answer = plane.ask("POST", "/tokens/ORDER-1/pause", {}, headers=cross)
    assert (status, answer["code"]) == (403, "forbidden")
    assert "Sec-Fetch-Site" in answer["error"]
    assert plane.ask("GET", "/tokens/ORDER-1", who="ops")[1]["status"] == "active"
    # A link from another site to a page that only reads still opens it.
    assert plane.ask("GET", "/tokens/ORDER-1", headers=cross)[0] == 200
    same = {"Sec-Fetch-Site": "same-origin", **auth(plane)}
    assert plane.ask("POST", "/tokens/ORDER-1/pause", {}, headers=same)[0] == 200


@pytest.mark.parametrize("body", [None, {"token": "NEW-1", "context": {"title": "t"}}])
def test_a_post_or_put_without_a_json_content_type_is_refused_even_without_a_body(
    plane: Plane, body: Any
) -> None:
    started(plane)
    bare = {"Connection": "close", **auth(plane)}
    for method, path in [
        ("POST", "/tokens/ORDER-1/cancel"),
        ("POST", "/tokens"),
        ("PUT", "/tasks/1/memory"),
    ]:
        [reply], _ = exchange(
            plane.served.port, request_bytes(method, path, body, bare, typed=False)
        )
        assert is_refusal(reply, 415, "bad_request"), (method, path, reply)
        assert "application/json" in reply.body["error"]
    assert plane.ask("GET", "/tokens/ORDER-1", who="ops")[1]["status"] == "active"
    assert plane.ask("GET", "/tokens/NEW-1", who="ops")[0] == 404


def test_a_request_target_that_names_a_host_is_held_to_the_host_rule(plane: Plane) -> None:
    started(plane)
    port = plane.served.port
    sent = {"Connection": "close", **auth(plane)}
    for target, status in [
        ("http://evil.example/tokens/ORDER-1/cancel", 403),
        ("http://evil.example:80/tokens/ORDER-1/pause", 403),
        (f"http://127.0.0.1:{port}/tokens/ORDER-1/pause", 200),
        ("http://proxy.example/tokens/ORDER-1/resume", 200),
    ]:
        [reply], _ = exchange(port, request_bytes("POST", target, {}, sent))
        assert reply.status == status, (target, reply)
        if status == 403:
            assert is_refusal(reply, 403, "forbidden") and "evil.example" in reply.body["error"]
    assert plane.ask("GET", "/tokens/ORDER-1", who="ops")[1]["status"] == "active"


def test_a_cors_preflight_is_refused(plane: Plane) -> None:
    preflight = {
        "Origin": "http://127.0.0.1:8080",
        "Access-Control-Request-Method": "POST",
    }
    status, headers, answer = plane.served.request("OPTIONS", "/tokens", headers=preflight)
    assert (status, answer["code"]) == (403, "forbidden")
    assert not any(name.startswith("access-control-") for name in headers)


# authentication once every credential is revoked


def test_with_every_credential_revoked_every_route_but_the_open_ones_says_how_to_recover(
    backend: Backend,
) -> None:
    engine = build_engine(backend)
    add_credential(engine.store, "ops", Role.OPERATOR)
    revoke_credential(engine.store, "ops", force=True)
    guard = Guard(Access(engine.store), served_hosts("127.0.0.1", []))
    with serving(engine, guard=guard) as served:
        for route, (path, body) in REQUESTS.items():
            status, _, answer = served.request(route[0], path, body)
            if route in OPEN:
                assert status == 200, route
                continue
            assert (status, answer["code"]) == (401, "unauthorized"), (route, answer)
            assert "stateous auth add NAME --role operator" in answer["error"]
        status, _, health = served.request("GET", "/health")
        assert health["auth"] == "no_credential" and "warning" not in health


def test_health_warns_when_no_credential_protects_a_plane_reached_beyond_loopback(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    engine = build_engine(backend)
    caplog.set_level(logging.WARNING, "stateous.control.access")
    access = Access(engine.store, exposed=True)
    access.refresh()  # as serve does when it starts
    hosts = served_hosts("127.0.0.1", ["proxy.example"])
    with serving(engine, guard=Guard(access, hosts)) as served:
        health = served.request("GET", "/health")[2]
        assert health["auth"] == "off"
        assert health["warning"].startswith("no credential protects this control plane")
        add_credential(engine.store, "ops", Role.OPERATOR)
        access.refresh()
        health = served.request("GET", "/health")[2]
        assert (health["auth"], "warning" in health) == ("on", False)
        revoke_credential(engine.store, "ops", force=True)
        access.refresh()
        access.refresh()
        health = served.request("GET", "/health")[2]
        assert health["auth"] == "no_credential"
        assert health["warning"].startswith("no credential protects this control plane")
    said = [
        record.getMessage()
        for record in caplog.records
        if record.name == "stateous.control.access" and record.levelno == logging.WARNING
    ]
    assert len(said) == 2, said
    assert all(line.startswith("no credential protects this control plane") for line in said)


def test_a_claim_that_waits_while_its_credential_is_revoked_takes_no_task(plane: Plane) -> None:
    claim = {"supervisor": SUPERVISOR, "states": ["draft"], "wait": 10}
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(plane.ask, "POST", "/tasks/claim", claim, who="box")
        time.sleep(0.5)  # the claim waits for a task
        revoke_credential(plane.served.engine.store, "box")
        started(plane)
        status, answer = waiting.result(timeout=15)

    assert (status, answer["code"]) == (401, "unauthorized")
    tasks = plane.ask("GET", "/tasks", who="ops")[1]
    assert [(task["token"], task["status"]) for task in tasks] == [("ORDER-1", "queued")]


def test_a_waiting_claim_refused_for_its_revoked_credential_gives_up_its_place(
    plane: Plane,
) -> None:
    plane.served.engine.waits.limit = 1  # one claim may wait at a time
    other = add_credential(plane.served.engine.store, "box-2", Role.SUPERVISOR)
    claim = {"supervisor": SUPERVISOR, "states": ["draft"], "wait": 10}
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(plane.ask, "POST", "/tasks/claim", claim, who="box")
        time.sleep(0.5)
        revoke_credential(plane.served.engine.store, "box")
        started(plane)  # wakes the claim, which is refused as it is served again
        assert waiting.result(timeout=15)[0] == 401

    # The place is free again: the next claim waits its whole second, not turned away.
    sent = time.monotonic()
    idle = {"supervisor": "box-2", "states": ["nowhere"], "wait": 1}
    status, headers, _ = plane.served.request(
        "POST", "/tasks/claim", idle, {"Authorization": f"Bearer {other}"}
    )
    assert (status, headers.get("retry-after")) == (204, None)
    assert time.monotonic() - sent >= 0.9


# a GitHub webhook's signature, and what a webhook may set on a start


def test_a_github_webhooks_signature_opens_only_its_own_route(plane: Plane) -> None:
    # The signature covers the body only: were it taken on the general routes, the bytes
    # of one delivery (a ping's too) would fire the mapped event on any token, again and
    # again, under new delivery ids.
    started(plane)
    started(plane, "VICTIM")
    body = msgspec.json.encode({"ref": "refs/heads/main"})
    for n, raw in enumerate([body, msgspec.json.encode({"zen": "hi", "hook_id": 1})]):
        replay = {"X-GitHub-Delivery": f"again-{n}", **signed_headers(raw, "stq_the-hook-key")}
        status, answer = plane.ask(
            "POST", "/tokens/VICTIM/events/submitted", headers=replay, raw=raw
        )
        assert (status, answer["code"]) == (401, "unauthorized"), answer
        status, answer = plane.ask(
            "POST", "/tokens/VICTIM/events/submitted", who="github", headers=replay, raw=raw
        )
        assert (status, answer["code"]) == (403, "forbidden"), answer
    assert plane.ask("GET", "/tokens/VICTIM", who="ops")[1]["state"] == "draft"
    assert [kind for kind, _ in entries(plane, "VICTIM")][-1] == "task_queued"
    ping = {"X-GitHub-Event": "ping", **signed_headers(b"{}", "stq_the-hook-key")}
    assert plane.ask("POST", "/hooks/github", headers=ping, raw=b"{}") == (200, {"pong": True})


@pytest.mark.parametrize(
    "extra", [{"budget": {"usd": 1e12}}, {"priority": 100}, {"budget": {"usd": 1}, "priority": 1}]
)
def test_a_webhook_may_not_set_a_budget_or_a_priority_on_a_start(
    plane: Plane, extra: dict[str, Any]
) -> None:
    start = {"token": "RICH", "context": {"title": "t"}, **extra}
    status, answer = plane.ask("POST", "/tokens", start, who="starter")
    assert (status, answer["code"]) == (403, "forbidden"), answer
    assert plane.ask("GET", "/tokens/RICH", who="ops")[0] == 404
    assert plane.ask("POST", "/tokens", start, who="ops")[0] == 201
    plain = {"token": "PLAIN", "context": {"title": "t"}}
    assert plane.ask("POST", "/tokens", plain, who="starter")[0] == 201


def test_a_refused_github_delivery_keeps_its_refusal_in_the_ledger_and_moves_nothing(
    plane: Plane,
) -> None:
    started(plane)
    assert plane.ask("POST", "/tokens/ORDER-1/events/submitted", who="ops")[0] == 200
    before = entries(plane, "ORDER-1")
    body = b"{}"
    delivery = {"X-GitHub-Event": "push", "X-GitHub-Delivery": "late"}
    status, answer = plane.ask(
        "POST",
        "/hooks/github",
        headers={**delivery, **signed_headers(body, "stq_the-hook-key")},
        raw=body,
    )
    assert (status, answer["code"]) == (409, "event_not_allowed"), answer
    after = entries(plane, "ORDER-1")
    assert after[: len(before)] == before
    assert [kind for kind, _ in after[len(before) :]] == ["event_rejected"]
    assert plane.ask("GET", "/tokens/ORDER-1", who="ops")[1]["state"] == "review"
