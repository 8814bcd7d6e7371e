"""The OpenAPI document of the API: served at /openapi.json, equal to the routes, and a seeded
fuzz run of the API from it on both databases, in which no answer is a 5xx or an
undocumented code."""

from __future__ import annotations

import re
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from stateous.control.http import openapi
from stateous.control.http.routes import RULES
from stateous.control.waiting_claims import LONGEST_WAIT
from tests.control.conftest import Served
from tests.control.test_access import app_routes

ROOT = Path(__file__).resolve().parents[2]


def documented_codes() -> set[str]:
    """The codes of the refusal table of docs/reference/http.md."""
    text = (ROOT / "docs" / "reference" / "http.md").read_text(encoding="utf-8")
    table = text.split("## Refusals", 1)[1]
    return set(re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE))


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
CODES = documented_codes() - {"unexpected"}


@schema.parametrize()
@settings(
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
        assert body["code"] in CODES, body
