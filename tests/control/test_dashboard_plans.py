"""The token list's plans in a real headless Chromium against a real control plane: from the
list's filters the page makes a plan, shows its count, its tokens and its id, and acts on
nothing until Apply; Apply acts on each token once and shows each outcome (done, or refused
with why); Discard leaves every token as it was; a long plan shows its first tokens with
the count and is applied in parts; a refusal of the control plane is shown as the page
shows others. Every check of the tokens is also made over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.control.test_dashboard import (
    agreed_plane,
    browser,
    call,
    plane,
    screenshot,
    start,
    text_of,
    texts_of,
    wait,
)
from tests.control.test_dashboard_week import both_widths

__all__ = ["browser", "plane"]

#: The tokens of the shown plan, each as its row reads: token, outcome, reason.
ROWS = "table.plan-tokens tbody tr"


def listed(driver: WebDriver) -> list[str]:
    return sorted(texts_of(driver, "table.tokens tbody tr td:first-child"))


def make_plan(browser: WebDriver, action: str) -> str:
    """Choose the action, press Make a plan, and return the id of the plan shown."""
    wait(browser, lambda driver: driver.find_element(By.ID, "plan-make").is_enabled())
    Select(browser.find_element(By.ID, "plan-action")).select_by_value(action)
    browser.find_element(By.ID, "plan-make").click()
    shown = wait(browser, lambda driver: driver.find_elements(By.ID, "plan-summary"))
    return str(shown[0].get_attribute("data-plan"))


def rows(browser: WebDriver) -> list[list[str]]:
    return [row.split("\t") for row in texts_of(browser, ROWS)]


def outcomes(plane: Any, plan: str) -> dict[str, str]:
    return {one["token"]: one["outcome"] for one in call(plane, "GET", f"/plans/{plan}")["tokens"]}


def statuses(plane: Any, *tokens: str) -> list[str]:
    return [call(plane, "GET", f"/tokens/{token}")["status"] for token in tokens]


def test_a_plan_from_the_filters_shows_its_tokens_then_applies_each_once(
    browser: WebDriver, plane: Any, tmp_path: Path
) -> None:
    for token in ("ORDER-1", "ORDER-2", "ORDER-3", "ORDER-4"):
        start(plane, token)
    call(plane, "POST", "/tokens/ORDER-1/events/submitted")
    call(plane, "POST", "/tokens/ORDER-4/pause")
    browser.get(f"{plane.url}/ui/#/tokens?status=active&state=draft")
    wait(browser, lambda driver: listed(driver) == ["ORDER-2", "ORDER-3"])
    assert text_of(browser, "#plan-where") == "Filters: status=active state=draft"

    plan = make_plan(browser, "cancel")

    summary = text_of(browser, "#plan-summary") or ""
    assert summary.startswith(f"Plan {plan}: cancel 2 token(s) where status=active state=draft.")
    assert "Nothing is done until you apply it." in summary
    assert sorted(rows(browser)) == [["ORDER-2", "pending"], ["ORDER-3", "pending"]]
    assert outcomes(plane, plan) == {"ORDER-2": "pending", "ORDER-3": "pending"}
    assert statuses(plane, "ORDER-2", "ORDER-3") == ["active", "active"]
    both_widths(browser, tmp_path, "plan-made")
    # A token that moves after the plan was made is refused at the apply, with why.
    call(plane, "POST", "/tokens/ORDER-3/pause")

    browser.find_element(By.ID, "plan-apply").click()

    wait(browser, lambda driver: (text_of(driver, "#plan-result") or "").startswith("Applied:"))
    assert text_of(browser, "#plan-result") == "Applied: 1 done, 1 refused, 0 pending."
    moved = "token 'ORDER-3' no longer matches status=active: its status is paused"
    assert rows(browser) == [["ORDER-3", "refused", moved], ["ORDER-2", "done"]]
    assert browser.find_elements(By.ID, "plan-apply") == []
    both_widths(browser, tmp_path, "plan-applied")
    assert outcomes(plane, plan) == {"ORDER-2": "done", "ORDER-3": "refused"}
    assert statuses(plane, "ORDER-1", "ORDER-2", "ORDER-3", "ORDER-4") == [
        "active", "cancelled", "paused", "paused"
    ]  # fmt: skip
    history = call(plane, "GET", "/tokens/ORDER-2/history")
    assert [entry["kind"] for entry in history].count("cancelled") == 1
    assert len([entry for entry in history if entry["data"].get("plan") == plan]) == 1
    # The list reads the API again: the cancelled token has left it.
    wait(browser, lambda driver: listed(driver) == [])
    browser.find_element(By.ID, "plan-close").click()
    assert browser.find_elements(By.ID, "plan-summary") == []


def test_a_discarded_plan_acts_on_nothing_and_a_list_without_filters_makes_none(
    browser: WebDriver, plane: Any
) -> None:
    for token in ("ORDER-1", "ORDER-2"):
        start(plane, token)
    browser.get(f"{plane.url}/ui/#/tokens")
    wait(browser, lambda driver: listed(driver) == ["ORDER-1", "ORDER-2"])
    assert not browser.find_element(By.ID, "plan-make").is_enabled()
    assert text_of(browser, "#plan-where") == (
        "Filter the list first: a plan acts on the tokens that its filters select."
    )
    before = call(plane, "GET", "/tokens/ORDER-1/history")
    browser.get(f"{plane.url}/ui/#/tokens?status=active")
    wait(browser, lambda driver: listed(driver) == ["ORDER-1", "ORDER-2"])

    plan = make_plan(browser, "pause")
    browser.find_element(By.ID, "plan-discard").click()

    wait(browser, lambda driver: driver.find_elements(By.ID, "plan-summary") == [])
    assert text_of(browser, "#plan-result") == f"Plan {plan} was discarded: no token was touched."
    assert outcomes(plane, plan) == {"ORDER-1": "pending", "ORDER-2": "pending"}
    assert statuses(plane, "ORDER-1", "ORDER-2") == ["active", "active"]
    assert call(plane, "GET", "/tokens/ORDER-1/history") == before


def test_a_long_plan_shows_its_first_tokens_with_the_count_and_applies_them_all_in_parts(
    browser: WebDriver, plane: Any
) -> None:
    tokens = [f"ORDER-{number:03d}" for number in range(230)]
    for token in tokens:
        start(plane, token)
    browser.get(f"{plane.url}/ui/#/tokens?status=active&state=draft")
    wait(browser, lambda driver: len(listed(driver)) == 100)
    Select(browser.find_element(By.ID, "plan-action")).select_by_value("retry")
    assert browser.find_element(By.ID, "plan-option").is_displayed()
    Select(browser.find_element(By.ID, "plan-action")).select_by_value("pause")
    assert not browser.find_element(By.ID, "plan-option").is_displayed()

    plan = make_plan(browser, "pause")

    assert "pause 230 token(s)" in (text_of(browser, "#plan-summary") or "")
    assert len(rows(browser)) == 50
    assert text_of(browser, "#plan-more") == "and 180 more"
    browser.find_element(By.ID, "plan-apply").click()
    wait(browser, lambda driver: text_of(driver, "#plan-result") == (
        "Applied: 230 done, 0 refused, 0 pending."
    ), 30)  # fmt: skip
    shown = call(plane, "GET", f"/plans/{plan}")
    assert shown["pending"] == 0 and {one["outcome"] for one in shown["tokens"]} == {"done"}
    assert len(call(plane, "GET", "/tokens?status=paused&limit=1000")) == 230


def refusing(status: str, code: str, sentence: str) -> Callable[..., list[bytes]]:
    """A WSGI app that refuses every request as the API does."""

    def wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response(status, [("Content-Type", "application/json")])
        return [json.dumps({"error": sentence, "code": code}).encode()]

    return wsgi


def test_a_refused_plan_is_shown_as_the_page_shows_other_refusals(
    browser: WebDriver, tmp_path: Path
) -> None:
    sentence = "the role supervisor may not call POST /plans"
    with agreed_plane(tmp_path, {"/plans": refusing("403 Forbidden", "forbidden", sentence)}) as at:
        start(at, "ORDER-1")
        browser.get(f"{at.url}/ui/#/tokens?status=active")
        wait(browser, lambda driver: listed(driver) == ["ORDER-1"])
        browser.find_element(By.ID, "plan-make").click()
        wait(browser, lambda driver: text_of(driver, "#plan-result") == f"Refused: {sentence}")
        assert browser.find_element(By.ID, "plan-result").get_attribute("class") == "error"
        assert browser.find_elements(By.ID, "plan-summary") == []
        screenshot(browser, tmp_path / "plan-refused.png")
        assert statuses(at, "ORDER-1") == ["active"]


def test_a_retry_plan_takes_its_from_state_to_the_plan_and_to_its_apply(
    browser: WebDriver, plane: Any
) -> None:
    for token in ("ORDER-1", "ORDER-2"):
        start(plane, token)
        grant = call(plane, "POST", "/tasks/claim", {"supervisor": "box-1", "states": ["draft"]})
        report = {"kind": "failed", "error": "crash", "supervisor": "box-1"}
        call(plane, "POST", f"/tasks/{grant['task']}/report", report)
    browser.get(f"{plane.url}/ui/#/tokens?status=failed")
    wait(browser, lambda driver: listed(driver) == ["ORDER-1", "ORDER-2"])
    Select(browser.find_element(By.ID, "plan-action")).select_by_value("retry")
    assert text_of(browser, "#plan-option-label") == "From state"
    browser.find_element(By.ID, "plan-option").send_keys("draft")

    plan = make_plan(browser, "retry")
    browser.find_element(By.ID, "plan-apply").click()

    wait(browser, lambda driver: text_of(driver, "#plan-result") == (
        "Applied: 2 done, 0 refused, 0 pending."
    ))  # fmt: skip
    assert call(plane, "GET", f"/plans/{plan}")["from"] == "draft"
    assert statuses(plane, "ORDER-1", "ORDER-2") == ["active", "active"]


class SecondPartCut(dict[str, Any]):
    """Answers for `agreed_plane` that refuse the second part of an apply, as a database
    too busy to take it would, and let every other request through."""

    def __init__(self) -> None:
        super().__init__()
        self.parts = 0

    def get(self, path: str, default: Any = None) -> Any:
        if not path.endswith("/apply"):
            return default
        self.parts += 1
        busy = refusing("503 Service Unavailable", "database_busy", "the database is busy")
        return busy if self.parts == 2 else default


def test_an_apply_stopped_half_way_goes_on_when_pressed_again_and_acts_on_each_token_once(
    browser: WebDriver, tmp_path: Path
) -> None:
    tokens = [f"ORDER-{number:03d}" for number in range(150)]
    with agreed_plane(tmp_path, SecondPartCut()) as at:
        for token in tokens:
            start(at, token)
        browser.get(f"{at.url}/ui/#/tokens?status=active")
        wait(browser, lambda driver: len(listed(driver)) == 100)
        plan = make_plan(browser, "pause")
        browser.find_element(By.ID, "plan-apply").click()
        wait(browser, lambda driver: text_of(driver, "#plan-result") == (
            "The apply stopped: the database is busy. "
            "Apply again goes on with the tokens not acted on yet."
        ))  # fmt: skip
        assert call(at, "GET", f"/plans/{plan}")["pending"] == 50

        browser.find_element(By.ID, "plan-apply").click()

        wait(browser, lambda driver: text_of(driver, "#plan-result") == (
            "Applied: 150 done, 0 refused, 0 pending."
        ))  # fmt: skip
        assert len(call(at, "GET", "/tokens?status=paused&limit=1000")) == 150
        for token in tokens[:3] + tokens[-3:]:
            kinds = [entry["kind"] for entry in call(at, "GET", f"/tokens/{token}/history")]
            assert kinds.count("paused") == 1
