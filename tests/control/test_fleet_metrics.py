"""The fleet's figures of `GET /metrics`, scraped over HTTP from a real `stateous serve`
process after a real `stateous supervise` process has claimed and sent heartbeats."""

from __future__ import annotations

import http.client
import platform
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from stateous._version import __version__
from tests.control.serving import Launcher
from tests.supervisor.support import Supervisors, wait_until, write_folder, write_graph


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """GET /metrics; each family's samples by name."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        assert response.status == 200
        text = response.read().decode()
    finally:
        connection.close()
    return {
        sample.name: [(dict(s.labels), s.value) for s in family.samples if s.name == sample.name]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_tell_each_supervisor_s_last_heartbeat_and_the_build(
    launcher: Launcher, supervisors: Supervisors, tmp_path: Path
) -> None:
    graph = tmp_path / "orders.json"
    write_graph(graph)
    served = launcher.serve(graph, tmp_path / "orders.sqlite", "--lease", "4s")
    before = time.time()
    folder = write_folder(tmp_path / "box-1", served.url, graph)
    supervisor = supervisors.serving(folder)
    assert (
        served.request("POST", "/tokens", {"token": "ORDER-1", "context": {"title": "a"}})[0] == 201
    )
    wait_until(
        lambda: served.request("GET", "/tokens/ORDER-1")[1]["status"] == "completed",
        "ORDER-1 completed",
        15,
    )

    figures = scrape(served.port)
    [(labels, seen)] = figures["stateous_supervisor_last_seen_seconds"]
    assert labels == {"supervisor": "box-1"}
    assert before - 1 <= seen <= time.time() + 1
    assert figures["stateous_build_info"] == [
        (
            {"version": __version__, "python": platform.python_version(), "database": "sqlite"},
            1.0,
        )
    ]
    assert supervisor.stop() == 0
