"""The dashboard and budgets, in a real headless Chromium against a real control plane: a
token's page says what it and its tree (its children included) spent and its tree's
budget, in the words of `token show` (its own function, on the same answer of the API)."""

from __future__ import annotations

from pathlib import Path

from selenium.webdriver.remote.webdriver import WebDriver

from stateous.cli.history import spent_line
from tests.control.conftest import serving
from tests.control.support import open_backend, plane_for
from tests.control.test_budgets import claim, fanout, report, token
from tests.control.test_dashboard import browser, call, screenshot, text_of, wait

__all__ = ["browser"]


def test_a_token_page_shows_what_the_token_and_its_tree_spent_and_the_budget(
    browser: WebDriver, tmp_path: Path
) -> None:
    with open_backend("sqlite", tmp_path) as backend:
        plane = plane_for(fanout(routed=True, budget={"usd": 1}), backend)
        with serving(plane.engine) as served:
            call(served, "POST", "/tokens", {"token": "T"})
            first, second = claim(served), claim(served)
            assert first is not None and second is not None
            assert report(served, first, spent={"usd": 0.2, "tokens": 3400})[0] == 200

            browser.get(f"{served.url}/ui/#/tokens/{first['token']}")
            wait(browser, lambda driver: (text_of(driver, "#spent") or "").startswith("spent:"))
            assert text_of(browser, "#spent") == (
                "spent: tokens=3400 usd=0.2; its tree: tokens=3400 usd=0.2; "
                "budget of T: usd=1, reserved usd=0.3"
            )
            assert text_of(browser, "#spent") == spent_line(token(served, first["token"])["spent"])
            screenshot(browser, tmp_path / "spent.png")

            browser.get(f"{served.url}/ui/#/tokens/T")
            wait(browser, lambda driver: (text_of(driver, "#spent") or "").startswith("spent: no"))
            assert text_of(browser, "#spent") == (
                "spent: nothing; its tree: tokens=3400 usd=0.2; "
                "budget of T: usd=1, reserved usd=0.3"
            )
            assert text_of(browser, "#spent") == spent_line(token(served, "T")["spent"])
