"""The dashboard as a team sees it in its first week, in a real headless Chromium against a
real control plane: no stray text under a short list, a disabled Cancel drawn as disabled,
the tokens that failed in the last day with their error, a silent supervisor marked gone,
a payload example made from the chosen event's schema, the history in the words of
`stateous token show`, every time in UTC on a 24-hour clock, and a broken link that
leaves the page working. Each check saves screenshots at 1280 and 390 pixels wide into
the test's folder.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from stateous.cli.history import history_lines
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from tests.control.conftest import Served, serving, write_graph
from tests.control.support import open_backend
from tests.control.test_dashboard import (
    browser,
    call,
    plane,
    screenshot,
    start,
    text_of,
    texts_of,
    wait,
)

__all__ = ["browser", "plane"]

#: The dark red of a live Cancel button.
DANGER = "rgb(155, 34, 38)"


def both_widths(browser: WebDriver, folder: Path, name: str) -> None:
    """Save the page at a desktop's and a phone's width; at the phone's, nothing sticks out."""
    screenshot(browser, folder / f"{name}-1280.png")
    browser.set_window_size(390, 844)
    try:
        time.sleep(0.3)
        width = browser.execute_script("return document.documentElement.scrollWidth")
        assert width <= browser.execute_script("return window.innerWidth")
        screenshot(browser, folder / f"{name}-390.png")
    finally:
        browser.set_window_size(1280, 1000)


def claim(plane: Served, state: str, supervisor: str = "box-1") -> int:
    grant = call(plane, "POST", "/tasks/claim", {"supervisor": supervisor, "states": [state]})
    return int(grant["task"])


def test_a_short_token_list_has_no_stray_text_under_it(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    start(plane, "ORDER-1")
    start(plane, "ORDER-2")
    browser.get(f"{plane.url}/ui/#/tokens")
    wait(browser, lambda driver: len(texts_of(driver, "table.tokens tbody tr")) == 2)
    assert "null" not in (text_of(browser, "#view") or "")
    both_widths(browser, tmp_path, "short-list")


def test_a_disabled_cancel_is_drawn_as_disabled(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    start(plane, "ORDER-1")
    call(plane, "POST", "/tokens/ORDER-1/cancel")
    browser.get(f"{plane.url}/ui/#/tokens/ORDER-1")
    wait(browser, lambda driver: "cancelled" in (text_of(driver, "#facts") or ""))
    cancel = browser.find_element(By.ID, "cancel")
    assert not cancel.is_enabled()
    assert cancel.value_of_css_property("background-color") != DANGER
    pause = browser.find_element(By.ID, "pause")
    assert cancel.value_of_css_property("background-color") == pause.value_of_css_property(
        "background-color"
    )
    both_widths(browser, tmp_path, "cancel-disabled")


def test_the_overview_lists_the_tokens_that_failed_in_the_last_day_with_their_error(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    start(plane, "ORDER-1")
    start(plane, "ORDER-2")
    task = claim(plane, "draft")
    failed = {"kind": "failed", "error": "disk full on /var", "attempt": 1, "supervisor": "box-1"}
    assert call(plane, "POST", f"/tasks/{task}/report", failed)["status"] == "failed"
    browser.get(f"{plane.url}/ui/")
    rows = wait(browser, lambda driver: texts_of(driver, "#failed tbody tr"))
    assert len(rows) == 1
    assert "ORDER-1" in rows[0] and "disk full on /var" in rows[0]
    assert "ORDER-2" not in (text_of(browser, "#failed") or "")
    both_widths(browser, tmp_path, "failed")


@contextmanager
def leased_plane(folder: Path, lease: float) -> Iterator[Served]:
    """The `orders` control plane on SQLite, whose claims hold a lease of `lease` seconds."""
    with open_backend("sqlite", folder) as backend:
        engine = Engine(Graph.load(write_graph(folder)), backend.store(), lease=lease)
        with serving(engine) as served:
            yield served


def test_a_supervisor_silent_for_a_whole_lease_is_marked_gone(
    browser: WebDriver, tmp_path: Path
) -> None:
    with leased_plane(tmp_path, 2) as plane:
        start(plane, "ORDER-1")
        start(plane, "ORDER-2")
        claim(plane, "draft", "box-old")
        time.sleep(3)
        held = claim(plane, "draft", "box-new")
        call(plane, "POST", "/tasks/heartbeat", {"supervisor": "box-new", "tasks": [held]})
        browser.get(f"{plane.url}/ui/")
        listed = "table.supervisors tbody tr"
        rows = wait(browser, lambda driver: len(found := texts_of(driver, listed)) == 2 and found)
        lines = {row.split()[0]: row for row in rows}
        assert "gone" in lines["box-old"]
        assert "gone" not in lines["box-new"]
        gone = 'table.supervisors tr.gone[data-supervisor="box-old"]'
        assert browser.find_elements(By.CSS_SELECTOR, gone)
        both_widths(browser, tmp_path, "supervisors")


def test_the_payload_example_comes_from_the_chosen_event_s_schema(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    start(plane, "ORDER-1")
    browser.get(f"{plane.url}/ui/#/tokens/ORDER-1")
    wait(browser, lambda driver: text_of(driver, "#event") == "submitted")
    payload = browser.find_element(By.ID, "payload")
    assert "approved" not in (payload.get_attribute("placeholder") or "")
    call(plane, "POST", "/tokens/ORDER-1/events/submitted")
    wait(browser, lambda driver: text_of(driver, "#event") == "reviewed")
    wait(browser, lambda driver: '"note": ""' in (payload.get_attribute("placeholder") or ""))
    assert payload.get_attribute("placeholder") == '{"approved": true, "note": ""}'
    both_widths(browser, tmp_path, "payload")


def test_the_history_says_each_entry_as_token_show_does(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    start(plane, "ORDER-1")
    task = claim(plane, "draft")
    moved = {
        "kind": "event",
        "event": "submitted",
        "context": {"amount": 5},
        "attempt": 1,
        "supervisor": "box-1",
    }
    call(plane, "POST", f"/tasks/{task}/report", moved)
    entries = call(plane, "GET", "/tokens/ORDER-1/history")
    said = [line.split("  ", 2)[2] for line in history_lines(entries) if not line.startswith("-- ")]
    assert "context changed: amount" in said
    assert [entry["text"] for entry in entries] == said
    browser.get(f"{plane.url}/ui/#/tokens/ORDER-1")
    shown = wait(
        browser,
        lambda driver: len(found := texts_of(driver, "#history .sentence")) == len(said) and found,
    )
    assert shown == said
    both_widths(browser, tmp_path, "history")


UTC_CLOCK = re.compile(r"^(live, )?updated \d{2}:\d{2}:\d{2} UTC$")


def test_every_time_shown_is_utc_on_a_24_hour_clock(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    start(plane, "ORDER-1")
    browser.get(f"{plane.url}/ui/#/tokens/ORDER-1")
    wait(browser, lambda driver: UTC_CLOCK.match(text_of(driver, "#updated") or ""))
    page = text_of(browser, "body") or ""
    assert not re.search(r"\b[AP]M\b", page)
    assert "UTC" in (text_of(browser, "#facts") or "")
    both_widths(browser, tmp_path, "clock")


def test_a_broken_token_link_says_so_and_the_page_keeps_working(
    browser: WebDriver, plane: Served, tmp_path: Path
) -> None:
    start(plane, "ORDER-1")
    browser.get(f"{plane.url}/ui/#/tokens/%E0%A4%A")
    wait(browser, lambda driver: "no such token" in (text_of(driver, "#view") or ""))
    assert "bad link" in (text_of(browser, "#view") or "")
    wait(browser, lambda driver: UTC_CLOCK.match(text_of(driver, "#updated") or ""))
    both_widths(browser, tmp_path, "bad-link")
    browser.execute_script("location.hash = '#/'")
    draft = 'table.counts tr[data-state="draft"] td.active'
    wait(browser, lambda driver: text_of(driver, draft) == "1")
    browser.execute_script("location.hash = '#/tokens/ORDER-1'")
    wait(browser, lambda driver: text_of(driver, "h1") == "ORDER-1")
