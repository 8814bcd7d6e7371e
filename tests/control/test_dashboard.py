"""The dashboard in a real headless Chromium, against a real control plane on a real port:
the overview counts the tokens per state, a token page shows its history (in the words of
`stateous token show`), notes, tasks and memory keys (user data as text, never as markup),
its buttons steer the token (after the browser's confirmation), the list filters, the page
asks for the secret when the API needs one, and it fits a phone's width. A screenshot of
each page goes to the test's folder.

One browser serves the whole module. Debian's `chromium` and `chromium-driver` run it
(`.ci/run` installs them); without them the tests skip, except in CI, where they fail.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from stateous.control.credentials import add_credential
from stateous.control.http.access import Access, served_hosts
from stateous.control.http.app import Guard, create_app
from stateous.control.http.server import DEFAULT_LIMITS, create_server
from stateous.model.vocabulary import Role
from tests.control.conftest import Served, build_engine, looping, serving
from tests.control.support import open_backend, plane_for
from tests.control.test_labels import MACOS, builds

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
HAS_BROWSER = Path(CHROMIUM).exists() and Path(DRIVER).exists()
if not HAS_BROWSER and not os.environ.get("CI"):
    pytest.skip("Debian's chromium and chromium-driver are not installed", allow_module_level=True)
#: A value of user data that would run as script if the page ever parsed it as HTML.
MARKUP = '<img src="x" id="injected" onerror="document.title=1">'


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,1000")
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@contextmanager
def orders_plane(folder: Path, secret: bool = False) -> Iterator[tuple[Served, str]]:
    """The `orders` control plane on SQLite, behind the browser checks that `serve` makes,
    with an operator's credential when `secret`; yield it and the secret."""
    with open_backend("sqlite", folder) as backend:
        engine = build_engine(backend)
        given = add_credential(engine.store, "ops", Role.OPERATOR) if secret else ""
        guard = Guard(Access(engine.store), served_hosts("127.0.0.1", []))
        with serving(engine, guard=guard) as served:
            yield served, given


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[Served]:
    with orders_plane(tmp_path) as (served, _):
        yield served


def call(plane: Served, method: str, path: str, body: Any = None, secret: str = "") -> Any:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    status, _, answer = plane.request(method, path, body, headers)
    assert status < 300, answer
    return answer


def start(plane: Served, token: str, secret: str = "", title: str = "t") -> None:
    call(plane, "POST", "/tokens", {"token": token, "context": {"title": title}}, secret)


def wait(browser: WebDriver, check: Callable[[WebDriver], Any], timeout: float = 15) -> Any:
    return WebDriverWait(browser, timeout).until(check)


#: The shown text of each element that a selector finds, read in one go: the page replaces
#: its panels at each update, so an element found before may be gone a moment later.
TEXTS = """
return [...document.querySelectorAll(arguments[0])].map(
    (found) => (found.innerText ?? found.textContent).trim());
"""


def texts_of(browser: WebDriver, selector: str) -> list[str]:
    return browser.execute_script(TEXTS, selector)


def text_of(browser: WebDriver, selector: str) -> str | None:
    found = texts_of(browser, selector)
    return found[0] if found else None


def confirm(browser: WebDriver) -> str:
    """Accept the page's confirmation and answer its question."""

    def alert(driver: WebDriver) -> Any:
        try:
            return driver.switch_to.alert
        except NoAlertPresentException:
            return False

    question = wait(browser, alert)
    said = question.text
    question.accept()
    return said


def screenshot(browser: WebDriver, path: Path) -> None:
    """Write a PNG of the whole page: the window is made as tall as the page for it."""
    size = browser.get_window_size()
    tall = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(size["width"], max(size["height"], min(tall + 160, 6000)))
    try:
        assert browser.save_screenshot(str(path))
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert path.read_bytes().startswith(b"\x89PNG")


def test_the_overview_shows_the_active_tokens_per_state(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    for token in ("ORDER-1", "ORDER-2", "ORDER-3", "ORDER-4"):
        start(plane, token)
    call(plane, "POST", "/tokens/ORDER-1/events/submitted")
    call(plane, "POST", "/tokens/ORDER-2/pause")
    call(plane, "POST", "/tasks/claim", {"supervisor": "box-7", "states": ["draft"]})
    browser.get(f"{plane.url}/ui/")
    draft = 'table.counts tr[data-state="draft"]'
    wait(browser, lambda driver: text_of(driver, f"{draft} td.active") == "2")
    assert text_of(browser, f"{draft} td.paused") == "1"
    assert text_of(browser, 'table.counts tr[data-state="review"] td.active') == "1"
    assert text_of(browser, 'svg.graph g[data-state="draft"] .count') == "2"
    assert text_of(browser, 'svg.graph g[data-state="review"] .count') == "1"
    stuck = text_of(browser, "#stuck") or ""
    assert "Queued longer than" in stuck and "In one state longer than" in stuck
    assert "has no GET" not in stuck
    wait(browser, lambda driver: "box-7" in (text_of(driver, "#supervisors") or ""))
    screenshot(browser, tmp_path / "overview.png")
    # It reads the API again by itself.
    start(plane, "ORDER-5")
    wait(browser, lambda driver: text_of(driver, f"{draft} td.active") == "3")
    # At a phone's width, nothing sticks out sideways.
    browser.set_window_size(390, 844)
    try:
        width = browser.execute_script("return document.documentElement.scrollWidth")
        assert width <= browser.execute_script("return window.innerWidth")
        screenshot(browser, tmp_path / "overview-phone.png")
    finally:
        browser.set_window_size(1280, 1000)


def test_the_overview_comes_back_after_leaving_it_many_times_and_updates_after_back(
    browser: WebDriver, plane: Served
) -> None:
    # Each page left for another stays in the browser's back/forward cache; a stream it
    # kept open there would hold one of the six connections the browser gives this host.
    start(plane, "ORDER-1")
    draft = 'table.counts tr[data-state="draft"] td.active'
    for _ in range(8):
        browser.get("about:blank")
        browser.get(f"{plane.url}/ui/")
        wait(browser, lambda driver: text_of(driver, draft) == "1")
    browser.get("about:blank")
    browser.back()
    start(plane, "ORDER-2")
    wait(browser, lambda driver: text_of(driver, draft) == "2")


def test_a_token_page_shows_its_history_tasks_memory_keys_and_notes_as_text(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    start(plane, "ORDER-1", title=MARKUP)
    grant = call(plane, "POST", "/tasks/claim", {"supervisor": "box-1", "states": ["draft"]})
    task = grant["task"]
    call(plane, "POST", f"/tasks/{task}/note", {"text": f"looking {MARKUP}", "attempt": 1})
    call(plane, "PUT", f"/tasks/{task}/memory", {"key": "dev", "value": {"x": 1}, "attempt": 1})
    history = call(plane, "GET", "/tokens/ORDER-1/history")
    browser.get(f"{plane.url}/ui/#/tokens/ORDER-1")
    shown = wait(
        browser,
        lambda driver: len(found := texts_of(driver, "#history li")) == len(history) and found,
    )
    assert "started" in shown[0] and f"#{history[0]['seq']}" in shown[0]
    assert any("entered draft" in line for line in shown)
    assert any(f"box-1 took task {task} (attempt 1)" in line for line in shown)
    assert any(f"looking {MARKUP}" in line for line in shown)
    assert json.dumps(MARKUP) in (text_of(browser, "#context") or "")
    assert browser.find_elements(By.ID, "injected") == []
    assert "dev" in (text_of(browser, "#memory") or "")
    assert "1: box-1" in (text_of(browser, "#tasks") or "")
    assert "No children." in (text_of(browser, "#children") or "")
    assert browser.find_elements(By.CSS_SELECTOR, 'svg.graph g.current[data-state="draft"]')
    screenshot(browser, tmp_path / "token.png")


def test_the_buttons_pause_resume_and_fire_an_event_after_a_confirmation(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    start(plane, "ORDER-1")
    browser.get(f"{plane.url}/ui/#/tokens/ORDER-1")
    status = "#facts"

    def shows(value: str) -> Callable[[WebDriver], bool]:
        return lambda driver: (
            driver.find_element(By.CSS_SELECTOR, status).get_attribute("data-status") == value
            and driver.find_element(By.ID, "pause").is_enabled() == (value == "active")
        )

    wait(browser, shows("active"))
    browser.find_element(By.ID, "pause").click()
    assert "Pause the token ORDER-1?" in confirm(browser)
    wait(browser, shows("paused"))
    assert call(plane, "GET", "/tokens/ORDER-1")["status"] == "paused"
    screenshot(browser, tmp_path / "paused.png")
    browser.find_element(By.ID, "resume").click()
    confirm(browser)
    wait(browser, shows("active"))
    assert call(plane, "GET", "/tokens/ORDER-1")["status"] == "active"
    # A dismissed confirmation sends nothing.
    browser.find_element(By.ID, "cancel").click()
    wait(browser, lambda driver: driver.switch_to.alert).dismiss()
    assert call(plane, "GET", "/tokens/ORDER-1")["status"] == "active"
    call(plane, "POST", "/tokens/ORDER-1/events/submitted")
    wait(browser, lambda driver: text_of(driver, "#event") == "reviewed")
    browser.find_element(By.ID, "payload").send_keys('{"approved": true}')
    browser.find_element(By.ID, "fire").click()
    assert "Fire reviewed" in confirm(browser)
    wait(browser, shows("completed"))
    assert call(plane, "GET", "/tokens/ORDER-1")["status"] == "completed"


def test_the_token_list_filters_by_status_and_state_and_finds_a_token_by_id(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    for token in ("ORDER-1", "ORDER-2", "ORDER-3"):
        start(plane, token)
    call(plane, "POST", "/tokens/ORDER-1/events/submitted")
    call(plane, "POST", "/tokens/ORDER-3/pause")
    browser.get(f"{plane.url}/ui/#/tokens?status=active&state=draft")

    def listed(driver: WebDriver) -> list[str]:
        return sorted(texts_of(driver, "table.tokens tbody tr td:first-child"))

    wait(browser, lambda driver: listed(driver) == ["ORDER-2"])
    screenshot(browser, tmp_path / "tokens.png")
    search = browser.find_element(By.ID, "search-id")
    search.send_keys("ORDER-3")
    search.submit()
    wait(browser, lambda driver: text_of(driver, "h1") == "ORDER-3")
    assert "/ui/#/tokens/ORDER-3" in browser.current_url


def test_with_authentication_on_the_page_asks_for_the_secret_and_keeps_it_out_of_addresses(
    browser: WebDriver, tmp_path: Path
) -> None:
    with orders_plane(tmp_path, secret=True) as (plane, secret):
        asked_and_answered(browser, plane, secret, tmp_path)


def asked_and_answered(browser: WebDriver, plane: Served, secret: str, tmp_path: Path) -> None:
    start(plane, "ORDER-1", secret)
    browser.get(f"{plane.url}/ui/")
    wait(browser, lambda driver: driver.find_element(By.ID, "secret").is_displayed())
    screenshot(browser, tmp_path / "secret.png")
    field = browser.find_element(By.ID, "secret")
    field.send_keys("stq_not-the-secret")
    browser.find_element(By.ID, "secret-submit").click()
    wait(browser, lambda driver: "refused that secret" in (text_of(driver, "#secret-error") or ""))
    field.send_keys(secret)
    browser.find_element(By.ID, "secret-submit").click()
    wait(browser, lambda driver: text_of(driver, 'tr[data-state="draft"] td.active') == "1")
    assert secret not in browser.current_url
    kept = browser.execute_script("return sessionStorage.getItem('stateous.secret')")
    assert kept == secret
    assert browser.execute_script("return localStorage.length") == 0
    browser.get(f"{plane.url}/ui/#/tokens/ORDER-1")
    wait(browser, lambda driver: len(texts_of(driver, "#history li")) > 2)
    browser.execute_script("sessionStorage.clear()")


# the routes of issue 20 that this control plane does not have yet


def moment(seconds: float) -> str:
    """The ISO moment `seconds` from now, as the API writes them."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def agreed_answers() -> dict[str, Any]:
    """Answers of `GET /tasks`, `/supervisors` and `/stats` in the shapes agreed for them:
    a task retried and queued for 20 minutes, a lease that ends in 10 seconds."""
    return {
        "/tasks": [
            {
                "task": 7,
                "token": "ORDER-1",
                "state": "draft",
                "status": "queued",
                "attempt": 2,
                "supervisor": None,
                "lease_until": None,
                "queued_at": moment(-1200),
                "age": 1200.0,
            },
            {
                "task": 9,
                "token": "ORDER-2",
                "state": "review",
                "status": "claimed",
                "attempt": 1,
                "supervisor": "box-1",
                "lease_until": moment(10),
                "queued_at": moment(-60),
                "age": 60.0,
            },
        ],
        "/supervisors": [
            {
                "supervisor": "box-1",
                "last_claim": moment(-60),
                "last_heartbeat": moment(-5),
                "tasks": [9],
            },
        ],
        "/stats": {
            "tokens": {"draft": {"active": 5, "paused": 2}, "review": {"active": 1}},
            "tasks": {"draft": {"queued": 1}, "review": {"claimed": 1}},
            "oldest_queued": {"draft": 1200.0},
            "timers_pending": 4,
            "last_hour": {"events_fired": 10, "leases_ended": 1, "attempts_failed": 2},
        },
    }


def answering(app: Any, answers: dict[str, Any]) -> Any:
    """A WSGI app that answers the paths of `answers` itself (JSON, or a WSGI app of its own)
    and leaves the rest to `app`."""

    def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
        answer = answers.get(environ["PATH_INFO"])
        if answer is None:
            return app(environ, start_response)
        if callable(answer):
            return answer(environ, start_response)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(answer).encode()]

    return wsgi


@contextmanager
def agreed_plane(folder: Path, answers: dict[str, Any]) -> Iterator[Served]:
    """The `orders` control plane on SQLite, with `answers` for the routes it lacks."""
    with open_backend("sqlite", folder) as backend:
        engine = build_engine(backend)
        sockets: dict[int, Any] = {}
        listener = socket.create_server(("127.0.0.1", 0))
        server = create_server(
            answering(create_app(engine), answers), DEFAULT_LIMITS, listener, map=sockets
        )
        try:
            with looping(server, sockets):
                yield Served(engine, int(server.effective_port))
        finally:
            engine.store.close()


def test_the_overview_shows_stuck_work_supervisors_and_stats_in_their_agreed_shapes(
    browser: WebDriver, tmp_path: Path
) -> None:
    with agreed_plane(tmp_path, agreed_answers()) as plane:
        browser.get(f"{plane.url}/ui/")
        draft = 'table.counts tr[data-state="draft"]'
        wait(browser, lambda driver: text_of(driver, f"{draft} td.active") == "5")
        assert text_of(browser, f"{draft} td.paused") == "2"
        assert "Counted by GET /stats." in (text_of(browser, "#workflow") or "")
        found = texts_of(browser, "#stuck .stuck-list")
        parts = (text.partition("\n") for text in found)
        lists = {title: rows.strip() for title, _, rows in parts}
        assert "7\tORDER-1\tdraft\tattempt 2, queued" in lists["Tasks tried again"]
        assert "ORDER-1" in lists["Queued longer than 10 minutes"]
        assert "box-1: " in lists["Leases that end within 30 seconds"]
        assert lists["Tokens in one state longer than 1 hours"] == "None."
        supervisors = text_of(browser, "table.supervisors tbody") or ""
        assert supervisors.startswith("box-1\t") and supervisors.endswith("\t9")
        assert "10 events fired, 1 leases ended, 2 attempts failed; 4 timers pending." in (
            text_of(browser, "#stats") or ""
        )
        screenshot(browser, tmp_path / "overview-agreed.png")


class Stream:
    """`GET /stream` in its agreed shape: open until closed, one event for each entry put."""

    def __init__(self) -> None:
        self.entries: queue.Queue[dict[str, Any]] = queue.Queue()
        self.closed = threading.Event()
        self.asked: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        self.asked.append(environ.get("QUERY_STRING", ""))
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        return self.events()

    def events(self) -> Iterator[bytes]:
        yield b": open\n\n"
        while not self.closed.is_set():
            try:
                entry = self.entries.get(timeout=0.2)
            except queue.Empty:
                continue
            data = json.dumps(entry)
            yield f"id: {entry['seq']}\nevent: {entry['kind']}\ndata: {data}\n\n".encode()


def test_a_token_page_follows_the_stream_where_the_control_plane_has_one(
    browser: WebDriver, tmp_path: Path
) -> None:
    stream = Stream()
    with agreed_plane(tmp_path, {"/stream": stream}) as plane:
        try:
            start(plane, "ORDER-1")
            browser.get(f"{plane.url}/ui/#/tokens/ORDER-1")
            # Once an update has seen the stream open, the next poll is 15 s away.
            wait(browser, lambda driver: (text_of(driver, "#updated") or "").startswith("live"))
            assert stream.asked == ["token=ORDER-1"]
            moved = call(plane, "POST", "/tokens/ORDER-1/events/submitted")
            entry = {"token": "ORDER-1", "seq": 9, "at": moment(0), "kind": "entered"}
            stream.entries.put({**entry, "data": {"state": moved["state"], "visit": 1}})
            wait(browser, lambda driver: "in review" in (text_of(driver, "#facts") or ""), 8)
        finally:
            browser.get("about:blank")
            stream.closed.set()


def test_the_history_shows_the_text_the_api_words_and_the_data_of_an_entry_without_one(
    browser: WebDriver, tmp_path: Path
) -> None:
    said = {"seq": 1, "at": moment(0), "kind": "note", "data": {"task": 2}, "text": MARKUP}
    bare = {"seq": 2, "at": moment(0), "kind": "a_later_kind", "data": {"x": [1, "é"]}}
    with agreed_plane(tmp_path, {"/tokens/ORDER-1/history": [said, bare]}) as plane:
        start(plane, "ORDER-1")
        browser.get(f"{plane.url}/ui/#/tokens/ORDER-1")
        shown = wait(browser, lambda driver: texts_of(driver, "#history .sentence"))
        assert shown == [MARKUP, 'a_later_kind: {"x": [1, "é"]}']
        assert browser.find_elements(By.ID, "injected") == []


# pages of another site


#: A page that cancels a token by a form that posts itself, as a page of any site may.
FORM_PAGE = """<!doctype html>
<form method="post" action="{url}/tokens/ORDER-1/cancel"></form>
<script>document.forms[0].submit();</script>
"""
#: A page that starts a token with a `no-cors` fetch of a JSON blob: the browser sends it
#: without a `Content-Type`, and without asking first.
FETCH_PAGE = """<!doctype html>
<script>
const body = new Blob([JSON.stringify({{token: "EVIL-1", context: {{title: "t"}}}})]);
fetch("{url}/tokens", {{method: "POST", mode: "no-cors", body}})
  .finally(() => {{ document.title = "sent"; }});
</script>
"""


@contextmanager
def other_site(folder: Path, pages: dict[str, str]) -> Iterator[str]:
    """Serve `pages` (name to HTML) from another local port, as a dev server or any local
    web app would; yield its address."""
    folder.mkdir()
    for name, html in pages.items():
        (folder / name).write_text(html)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_page_on_another_local_port_can_neither_cancel_nor_start_a_token(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    start(plane, "ORDER-1")
    pages = {
        "form.html": FORM_PAGE.format(url=plane.url),
        "fetch.html": FETCH_PAGE.format(url=plane.url),
    }
    with other_site(tmp_path / "site", pages) as site:
        browser.get(f"{site}/form.html")
        wait(browser, lambda driver: driver.current_url.endswith("/tokens/ORDER-1/cancel"))
        browser.get(f"{site}/fetch.html")
        wait(browser, lambda driver: driver.title == "sent")
    assert call(plane, "GET", "/tokens/ORDER-1")["status"] == "active"
    assert plane.request("GET", "/tokens/EVIL-1")[0] == 404
    # The control plane's own page, on its own origin, still steers it.
    browser.get(f"{plane.url}/ui/#/tokens/ORDER-1")
    wait(browser, lambda driver: driver.find_element(By.ID, "cancel").is_enabled())
    browser.find_element(By.ID, "cancel").click()
    confirm(browser)
    wait(
        browser,
        lambda driver: "Done: the token is cancelled" in (text_of(driver, "#action-result") or ""),
    )
    assert call(plane, "GET", "/tokens/ORDER-1")["status"] == "cancelled"


def test_a_task_no_supervisor_could_take_shows_why_on_its_token_page_and_in_stuck_work(
    browser: WebDriver, tmp_path: Path
) -> None:
    with open_backend("sqlite", tmp_path) as backend:
        plane = plane_for(builds(), backend)
        with serving(plane.engine) as served:
            call(served, "POST", "/tokens", {"token": "B-1"})
            grant = call(served, "POST", "/tasks/claim", {"supervisor": "l", "states": ["lint"]})
            report = {"supervisor": "l", "kind": "event", "event": "linted", "attempt": 1}
            call(served, "POST", f"/tasks/{grant['task']}/report", report)
            plane.clock.advance(3601)
            browser.get(f"{served.url}/ui/#/tokens/B-1")
            wait(browser, lambda driver: MACOS in (text_of(driver, "#facts") or ""))
            browser.get(f"{served.url}/ui/")
            titled = "Waiting for a supervisor"
            wait(browser, lambda driver: titled in texts_of(driver, "#stuck h3"))
            found = texts_of(browser, "#stuck .stuck-list")
            lists = {title: rows.strip() for title, _, rows in (t.partition("\n") for t in found)}
            assert f"B-1\tbuild\t{MACOS}" in lists[titled]
            screenshot(browser, tmp_path / "waits-for-a-supervisor.png")


def test_a_key_that_its_breaker_parked_is_listed_in_stuck_work_with_its_fingerprint(
    browser: WebDriver, tmp_path: Path
) -> None:
    from stateous.control import resources
    from tests.control.test_quota import coding

    with open_backend("sqlite", tmp_path) as backend:
        plane = plane_for(coding(breaker=2), backend)
        document = plane.engine.graph.document
        plane.store.write(lambda tx: resources.declare(tx, document.resources))
        with serving(plane.engine) as served:
            for token in ("R-1", "R-2"):
                call(served, "POST", "/tokens", {"token": token, "context": {"repo": "acme/api"}})
            for _ in range(2):
                grant = call(
                    served, "POST", "/tasks/claim", {"supervisor": "b", "states": ["code"]}
                )
                failed = {"supervisor": "b", "kind": "failed", "error": "boom 17"}
                failed["attempt"] = grant["attempt"]
                call(served, "POST", f"/tasks/{grant['task']}/report", failed)
            browser.get(f"{served.url}/ui/")
            titled = "Parked keys (quota or breaker)"
            wait(browser, lambda driver: titled in texts_of(driver, "#stuck h3"))
            found = texts_of(browser, "#stuck .stuck-list")
            lists = {title: rows.strip() for title, _, rows in (t.partition("\n") for t in found)}
            assert "\nrepo=acme/api\tbreaker\tuntil 20" in lists[titled], lists[titled]
            assert "2 failed attempts alike in a row: boom 17 (fingerprint " in lists[titled]
            screenshot(browser, tmp_path / "parked-keys.png")
