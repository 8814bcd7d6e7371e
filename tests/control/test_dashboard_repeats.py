"""The dashboard and `stop_on_repeat`, in a real headless Chromium against a real control
plane: the stuck-work panel lists a token whose retries a repeated failure ended, with the
failure's shape and fingerprint, and the token's history shows each failure's fingerprint.
"""

from __future__ import annotations

from pathlib import Path

from selenium.webdriver.remote.webdriver import WebDriver

from stateous.model.fingerprints import fingerprint
from tests.control.conftest import serving
from tests.control.support import open_backend, plane_for
from tests.control.test_dashboard import browser, call, screenshot, text_of, texts_of, wait
from tests.control.test_repeats import PLACE, calls

__all__ = ["browser"]

#: The stuck-work list of the tokens whose retries a repeat ended.
TITLE = "Retries stopped by a repeated failure (failed in the last day)"


def test_stuck_work_lists_a_token_stopped_by_a_repeat_with_the_shape_of_its_failure(
    browser: WebDriver, tmp_path: Path
) -> None:
    errors = [f"OSError: port {port} refused {PLACE}" for port in (8080, 8081, 9000)]
    with open_backend("sqlite", tmp_path) as backend:
        plane = plane_for(calls(), backend)
        with serving(plane.engine) as served:
            call(served, "POST", "/tokens", {"token": "CALL-1", "context": {"repo": "acme/api"}})
            call(served, "POST", "/tokens", {"token": "CALL-2", "context": {"repo": "acme/api"}})
            ask = {"supervisor": "b", "states": ["call"]}
            for attempt, error in enumerate(errors, start=1):
                grant = call(served, "POST", "/tasks/claim", ask)
                assert (grant["token"], grant["attempt"]) == ("CALL-1", attempt)
                report = {"supervisor": "b", "kind": "failed", "error": error, "attempt": attempt}
                call(served, "POST", f"/tasks/{grant['task']}/report", report)

            browser.get(f"{served.url}/ui/")
            wait(browser, lambda driver: TITLE in texts_of(driver, "#stuck h3"))
            found = texts_of(browser, "#stuck .stuck-list")
            lists = {title: rows.strip() for title, _, rows in (t.partition("\n") for t in found)}
            shape = f"OSError: port # refused {PLACE}"
            assert lists[TITLE].splitlines()[1:] == [
                f"CALL-1\tcall\t3 times\t{shape}\t{fingerprint(errors[0])}"
            ]
            screenshot(browser, tmp_path / "stopped-by-a-repeat.png")

            browser.get(f"{served.url}/ui/#/tokens/CALL-1")
            wait(browser, lambda driver: len(texts_of(driver, "#history .fingerprint")) == 4)
            assert set(texts_of(browser, "#history .fingerprint")) == {fingerprint(errors[0])}
            stopped = text_of(browser, "#history li.kind-retries_stopped .sentence")
            said = "task 1: the same failure 3 times with the same input: not tried again"
            assert stopped == said
