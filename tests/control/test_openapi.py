"""The OpenAPI document of the API: served at /openapi.json, equal to the routes, each
refusal status with the codes its route declares, and a seeded fuzz run of the API from it
on both databases, in which no answer is a 5xx, and every refusal is one of the codes that
its route's entry in the route table declares, with its status."""

from __future__ import annotations

import re
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from stateous.control.http import openapi
from stateous.control.http.operations import ALWAYS, Route
from stateous.control.http.routes import ROUTES
from stateous.control.http.routing import RULES
from stateous.control.waiting_claims import LONGEST_WAIT
from stateous.model.codes import BAD_REQUEST_STATUSES, STATUS, RefusalCode
from tests.control.conftest import Served
from tests.control.test_access import app_routes

ROOT = Path(__file__).resolve().parents[2]


def route_codes_documented() -> dict[tuple[str, str], list[str]]:
    """The codes of each route in docs/reference/http.md's table of refusals by route."""
    text = (ROOT / "docs" / "reference" / "http.md").read_text(encoding="utf-8")
    table = text.split("### Refusals by route", 1)[1].split("\n## ", 1)[0]
    found = {}
    for method, path, codes in re.findall(r"^\| (\w+) \| `(\S+)` \| (.*) \|$", table, re.M):
        found[(method, path)] = re.findall(r"`([a-z_]+)`", codes)
    return found


def test_the_document_names_every_route_and_no_other() -> None:
    routes = {route for route in app_routes() if route[0] != "HEAD"}
    described = {
        (method.upper(), template)
        for template, methods in openapi.document()["paths"].items()
        for method in methods
    }
    assert described == routes == set(RULES)


def test_the_document_is_served_at_openapi_json(served: Served) -> None:
    status, headers, body = served.request("GET", "/openapi.json")
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert body == openapi.document()
    assert body["openapi"].startswith("3.1")


def test_an_event_names_the_headers_of_a_signed_delivery() -> None:
    fire = openapi.document()["paths"]["/tokens/{token}/events/{event}"]["post"]
    headers = {param["name"] for param in fire["parameters"] if param["in"] == "header"}
    assert headers == {
        "Idempotency-Key",
        "X-Hub-Signature-256",
        "X-Stateous-Signature",
        "X-GitHub-Delivery",
    }


def test_a_github_hook_names_the_headers_of_github_and_its_answers() -> None:
    hook = openapi.document()["paths"]["/hooks/{name}"]["post"]
    headers = {param["name"] for param in hook["parameters"] if param["in"] == "header"}
    assert headers == {"X-Hub-Signature-256", "X-GitHub-Event", "X-GitHub-Delivery"}
    assert {"200", "201", "202", "401", "404", "409", "422"} <= set(hook["responses"])


#: Requests that fit the document and requests that break it, from a fixed seed.
FUZZ = SchemathesisConfig.from_dict(
    {"generation": {"mode": "all", "max-examples": 100, "deterministic": True}, "seed": 17}
)
# The answer of a live stream stays open: tests/control/test_stream.py covers that route.
schema = schemathesis.openapi.from_dict(openapi.document(), config=FUZZ).exclude(path="/stream")
#: Each route by method and path template.
BY_KEY = {(route.method, route.path): route for route in ROUTES}


def answered_as_declared(route: Route, status: int, code: str) -> bool:
    """Whether a refusal is one of the codes `route` declares, with that code's status."""
    if code not in route.operation.codes():
        return False
    return status in BAD_REQUEST_STATUSES if code == "bad_request" else status == STATUS[code]


def test_every_code_has_its_status_and_the_documents_table_says_the_same() -> None:
    text = (ROOT / "docs" / "reference" / "http.md").read_text(encoding="utf-8")
    table = text.split("## Refusals", 1)[1]
    documented = dict(re.findall(r"^\| `([a-z_]+)` \| (\d+)", table, re.MULTILINE))
    assert set(STATUS) == set(RefusalCode)
    assert documented == {str(code): str(status) for code, status in STATUS.items()}


def test_the_documents_refusals_by_route_are_the_route_tables() -> None:
    assert route_codes_documented() == {
        (route.method, route.path): [str(code) for code in route.operation.refusals]
        for route in ROUTES
    }


def test_each_refusal_status_lists_the_codes_its_route_declares() -> None:
    paths = openapi.document()["paths"]
    for route in ROUTES:
        responses = paths[route.path][route.method.lower()]["responses"]
        listed = {
            code
            for status, response in responses.items()
            for code in response.get("x-codes", [])
            if answered_as_declared(route, int(status), code)
        }
        every = {code for response in responses.values() for code in response.get("x-codes", [])}
        assert listed == every == {str(code) for code in route.operation.codes()}, route.path


@schema.parametrize()
# 50 examples a route and backend: the codes a fuzzed request meets come in the first few
# dozen, and twice as many doubled the suite's longest file for no new finding.
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_fuzzed_requests_get_documented_answers(case: schemathesis.Case, served: Served) -> None:
    # A valid claim may wait up to LONGEST_WAIT for a task before it answers.
    response = case.call(base_url=served.url, timeout=LONGEST_WAIT + 10)
    status = response.status_code
    assert status < 500 or status == 503, (case.method, case.formatted_path, response.text)
    if status >= 400:
        body = response.json()
        assert set(body) == {"error", "code"}, body
        route = BY_KEY.get((case.method.upper(), case.path))
        if route is None:  # a method the path does not take
            refused = (status, body["code"])
            assert refused == (405, "method_not_allowed") or refused[1] in ALWAYS, refused
        else:
            assert answered_as_declared(route, status, body["code"]), (route.path, status, body)
