"""The dashboard's files over real HTTP: served open (they hold no data) with a policy that
lets only this origin's own script run, only the shipped names, and `/workflow/layout`
behind the credential that the rest of the API asks. The files themselves are checked for
what would let a value of user data run as code: inline script, HTML parsed from text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import resources

import msgspec
import pytest

from stateous.control.credentials import add_credential
from stateous.control.http import ui
from stateous.control.http.access import Access, served_hosts
from stateous.control.http.app import Guard
from stateous.control.http.graph_layout import layout
from stateous.model.vocabulary import Role
from tests.control.conftest import Served, build_engine, serving
from tests.control.support import Backend


@pytest.fixture
def guarded(backend: Backend) -> Iterator[tuple[Served, str]]:
    """The `orders` control plane with authentication on, and an operator's secret."""
    engine = build_engine(backend)
    secret = add_credential(engine.store, "ops", Role.OPERATOR)
    guard = Guard(Access(engine.store), served_hosts("127.0.0.1", []))
    with serving(engine, guard=guard) as served:
        yield served, secret


def test_the_page_and_its_files_are_open_with_their_types_and_policy(
    guarded: tuple[Served, str],
) -> None:
    served, _ = guarded
    for path, name in [("/ui/", "index.html"), *((f"/ui/{name}", name) for name in ui.FILES)]:
        connection = served.connect()
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        assert response.status == 200, path
        assert response.getheader("Content-Type") == ui.FILES[name]
        assert response.getheader("X-Content-Type-Options") == "nosniff"
        policy = response.getheader("Content-Security-Policy") or ""
        assert "default-src 'self'" in policy and "script-src 'self'" in policy
        assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
        assert body == ui.content(name)
    status, headers, _ = served.request("HEAD", "/ui/")
    assert (status, headers["content-type"]) == (200, ui.FILES["index.html"])


@pytest.mark.parametrize(
    ("path", "refusal"),
    [
        ("/ui/nothing.js", (404, "not_found")),
        ("/ui/__init__.py", (404, "not_found")),
        ("/ui", (404, "not_found")),
        # An encoded slash never reaches a route.
        ("/ui/..%2fhealth", (400, "bad_request")),
    ],
)
def test_a_name_the_dashboard_does_not_ship_is_not_found(
    guarded: tuple[Served, str], path: str, refusal: tuple[int, str]
) -> None:
    served, _ = guarded
    status, _, answer = served.request("GET", path)
    assert (status, answer["code"]) == refusal


def test_the_layout_needs_the_credential_and_draws_the_served_graph(
    guarded: tuple[Served, str],
) -> None:
    served, secret = guarded
    status, _, answer = served.request("GET", "/workflow/layout")
    assert (status, answer["code"]) == (401, "unauthorized")
    status, _, answer = served.request(
        "GET", "/workflow/layout", headers={"Authorization": f"Bearer {secret}"}
    )
    assert status == 200
    assert answer == msgspec.json.decode(msgspec.json.encode(layout(served.engine.graph.document)))
    assert answer["workflows"]["orders"]["nodes"][0]["label"] == "START"


def shipped() -> set[str]:
    folder = resources.files(ui.PACKAGE)
    return {item.name for item in folder.iterdir() if item.is_file()} - {"__init__.py"}


def test_every_shipped_file_is_served_and_every_served_file_is_shipped() -> None:
    assert shipped() == set(ui.FILES)


def test_the_page_runs_no_inline_script_and_no_script_makes_html_from_text() -> None:
    page = (ui.content("index.html") or b"").decode()
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", page, re.DOTALL)
    assert scripts and all(body.strip() == "" for body in scripts)
    assert all('src="' in tag for tag in re.findall(r"<script\b[^>]*>", page))
    assert not re.search(r"\son[a-z]+\s*=", page) and " style=" not in page
    for name in [name for name in ui.FILES if name.endswith(".js")]:
        code = (ui.content(name) or b"").decode()
        for risky in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert risky not in code, (name, risky)
        assert "localStorage.setItem" not in code, "the secret is kept for the tab only"
