"""Benchmark: the dashboard's overview in a real headless Chromium, on a database of a million
tokens and on one of ten thousand.

Run: .venv/bin/python bench/bench_dashboard.py [--tokens 1000000,10000] [--loads 20] [--runs 50]
     .venv/bin/python bench/bench_dashboard.py --tokens 1000000 --db postgresql://USER@HOST:5432/EMPTY_DATABASE
For each size it fills a database with `bench_metrics.py`'s builder (a tenth of the tokens
live, each with its task and the counts table that `/stats` reads), spreads the claimed
tasks over 20 supervisors that sent a heartbeat just now, serves it with `stateous serve`,
and loads `/ui/` `--loads` times in Debian's headless Chromium (the first load, which warms
the browser and the server, is left out). A script put in the page before its own marks
when the table of counts per state appears and when the whole overview is filled (its
`updated` line is written); both are times from the navigation's start. The requests the
page made (its resource timings) are then each timed `--runs` times over one kept-alive
HTTP connection. Target: the overview within 200 ms with 1,000,000 tokens (100,000 live).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_metrics  # the database builder and the server of bench/bench_metrics.py
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from stateous.compiler.compile import compile_workflow
from stateous.control.store.rows import to_column
from stateous.model.graph_file import dump

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
SUPERVISORS = 20
TARGET_MS = 200
CLAIM = "INSERT INTO claims (supervisor, claimed_at, heartbeat_at) VALUES (?, ?, ?)"
#: Put in each page before its own script: marks the moments (performance.now(), from the
#: navigation's start) at which the counts per state and the whole overview are shown.
MARKER = """
window.__bench = {};
new MutationObserver(() => {
  const mark = window.__bench;
  const now = performance.now();
  if (mark.counts === undefined && document.querySelector("table.counts td.active")) {
    mark.counts = now;
  }
  const updated = document.getElementById("updated");
  if (mark.overview === undefined && /updated/.test(updated ? updated.textContent : "")) {
    mark.overview = now;
  }
}).observe(document, { childList: true, subtree: true, characterData: true });
"""
#: The API requests of the page (not its files, not the stream that stays open), in the
#: order they began, with their start and end from the navigation's start.
REQUESTS = """
return performance.getEntriesByType("resource")
  .filter((entry) => !entry.name.includes("/ui/") && !entry.name.includes("/stream"))
  .map((entry) => [new URL(entry.name).pathname + new URL(entry.name).search,
                   entry.startTime, entry.responseEnd]);
"""


def add_supervisors(db: str) -> None:
    """The claimed tasks spread over `SUPERVISORS` supervisors, each seen just now (the
    builder gives them all to one that `GET /supervisors` never heard of)."""
    now = to_column(time.time())
    spread = "UPDATE tasks SET claimed_by = 'box-' || (id % 20) WHERE status = 'claimed'"
    claims = [(f"box-{n}", now, now) for n in range(SUPERVISORS)]
    if db.startswith("sqlite:///"):
        import apsw

        connection = apsw.Connection(db.removeprefix("sqlite:///"))
        with connection:
            connection.execute(spread)
            connection.executemany(CLAIM, claims)
        connection.close()
        return
    import psycopg

    with psycopg.connect(db) as connection:
        connection.execute(spread)
        connection.cursor().executemany(CLAIM.replace("?", "%s"), claims)


def browser() -> WebDriver:
    """Headless Chromium with the options of tests/control/test_dashboard.py."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,1000")
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": MARKER})
    return driver


def load(driver: WebDriver, url: str) -> dict[str, Any]:
    """Load the overview once; its two marks and its API requests."""
    driver.get("about:blank")
    driver.get(f"{url}/ui/")
    marks = WebDriverWait(driver, 60, poll_frequency=0.02).until(
        lambda d: d.execute_script(
            "const m = window.__bench; return m && m.overview !== undefined && m;"
        )
    )
    marks["requests"] = driver.execute_script(REQUESTS)
    return marks


def shown_counts(driver: WebDriver) -> dict[str, str]:
    """The active count per state in the overview's table, as shown."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll('table.counts tr[data-state]')].map("
        "(row) => [row.dataset.state, row.querySelector('td.active').textContent]);"
    )
    return dict(rows)


def quantile(times: list[float], share: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def summary(times: list[float], high: float) -> str:
    return (
        f"median {statistics.median(times):7.1f} ms   p{round(high * 100)} "
        f"{quantile(times, high):7.1f} ms   max {max(times):7.1f} ms"
    )


def measure(driver: WebDriver, url: str, loads: int, runs: int) -> None:
    """Time the overview in the browser, then each request it made on its own."""
    first = load(driver, url)
    print(
        f"  first load (left out): counts {first['counts']:.0f} ms, "
        f"whole {first['overview']:.0f} ms"
    )
    marks = [load(driver, url) for _ in range(loads)]
    print(f"  counts per state shown  {summary([m['counts'] for m in marks], 0.9)}")
    print(f"  whole overview filled   {summary([m['overview'] for m in marks], 0.9)}")
    print("  its requests in the browser, start -> end from the navigation's start (median):")
    paths = list(dict.fromkeys(path for path, _, _ in marks[-1]["requests"]))
    for path in paths:
        found = [(s, e) for m in marks for p, s, e in m["requests"] if p == path]
        asked = len(found) / len(marks)
        begun = statistics.median(s for s, _ in found)
        ended = statistics.median(e for _, e in found)
        times = f" ({asked:g} times a load, the last)" if asked > 1 else ""
        print(f"    {path[:60]:60} {begun:6.1f} -> {ended:6.1f} ms{times}")
    print(f"  shown: {shown_counts(driver)}")
    print(f"  each request alone, {runs} times on one kept-alive connection:")
    for path in paths:
        print(f"    GET {path[:56]:56} {summary(bench_metrics.timed(url, path, runs), 0.99)}")


def one_size(driver: WebDriver, tokens: int, active: int, db: str | None, args: Any) -> None:
    with tempfile.TemporaryDirectory(prefix="stateous-dashboard-") as name:
        folder = Path(name)
        graph = folder / "bench.json"
        graph.write_bytes(dump(compile_workflow(bench_metrics.workflow())))
        url = db or f"sqlite:///{folder / 'bench.db'}"
        began = time.perf_counter()
        if db:
            bench_metrics.fill_postgres(db, tokens, active)
        else:
            bench_metrics.fill_sqlite(folder / "bench.db", tokens, active)
        add_supervisors(url)
        print(
            f"{tokens:,} tokens ({active:,} live) on {'Postgres' if db else 'SQLite'}, filled in "
            f"{time.perf_counter() - began:.0f} s; load average {load_average()}"
        )
        process, served = bench_metrics.serve(graph, url)
        try:
            measure(driver, served, args.loads, args.runs)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        print(f"  load average after: {load_average()}")


def load_average() -> str:
    return " ".join(f"{n:.2f}" for n in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="1000000,10000", help="sizes, comma-separated")
    parser.add_argument("--loads", type=int, default=20, help="timed loads of the page")
    parser.add_argument("--runs", type=int, default=50, help="timed requests of each route")
    parser.add_argument("--db", help="an empty Postgres database (one size only)")
    args = parser.parse_args()
    sizes = [int(size) for size in args.tokens.split(",")]
    if args.db and len(sizes) > 1:
        parser.error("--db takes one size of --tokens: the database must be empty")
    print(f"target: the overview within {TARGET_MS} ms with 1,000,000 tokens")
    driver = browser()
    try:
        for tokens in sizes:
            one_size(driver, tokens, tokens // 10, args.db, args)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
