"""A Postgres that cannot be reached for a while costs no lease: the control plane serves
on, and a supervisor that kept heartbeating loses nothing (docs/concepts/reliability.md)."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tests.control.serving import Launcher, orders, write_graph
from tests.control.test_serve_process import check_seqs, claim, start_token
from tests.proxy import Proxy

LEASE = 2.0


def through(url: str, proxy: Proxy) -> str:
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))


def test_a_database_out_of_reach_for_three_leases_ends_no_lease_of_a_supervisor_that_tried(
    launcher: Launcher, tmp_path: Path, url: str, proxy: Proxy
) -> None:
    graph = tmp_path / "orders.json"
    write_graph(graph, orders())
    served = launcher.serve(graph, None, "--db", through(url, proxy), "--lease", "2s")
    start_token(served, "ORDER-1")
    task = claim(served, "box-1")["task"]
    beat = {"supervisor": "box-1", "tasks": [task]}

    proxy.down()
    seen = set()
    out_of_reach = time.monotonic() + 3 * LEASE
    while time.monotonic() < out_of_reach:
        status, body = served.request("POST", "/tasks/heartbeat", beat)
        seen.add(status if status == 200 else (status, body["code"]))
        time.sleep(LEASE / 8)
    proxy.up()
    back = time.monotonic() + 10
    while (answer := served.request("POST", "/tasks/heartbeat", beat))[0] != 200:
        assert time.monotonic() < back, answer
        time.sleep(LEASE / 8)
    for _ in range(4):
        assert served.ok("POST", "/tasks/heartbeat", beat) == {"lost": []}
        time.sleep(LEASE / 4)
    body = {"kind": "event", "event": "submitted", "attempt": 1, "supervisor": "box-1"}
    token = served.ok("POST", f"/tasks/{task}/report", body)

    assert (503, "database_busy") in seen, seen
    assert token["state"] == "review"
    entries = served.history("ORDER-1")
    kinds = [entry["kind"] for entry in entries]
    assert kinds.count("task_claimed") == 1 and "task_failed" not in kinds, kinds
    check_seqs(entries)
    assert served.process.poll() is None
    assert served.stop() == 0
    assert "the database answers again: 1 claimed tasks get a full lease" in " ".join(served.lines)
