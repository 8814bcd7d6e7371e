"""Every session to Postgres cut at once, as a failover cuts them: the control plane connects
again, takes its lock again only where the `control_plane` row still names it, and a request
that met a dead session is served on a new one."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from stateous.control.serve import check_url, without_password
from stateous.control.store.backup import dump_settings
from tests.control.serving import Launcher, orders, write_graph
from tests.postgres.test_outages import through
from tests.proxy import Proxy

#: Requests at once before the cut, so that the pool keeps several sessions.
AT_ONCE = 8


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path, orders())
    return path


def fill_pool(request: Any) -> None:
    """Send `AT_ONCE` requests at the same time: each takes a session of the pool."""
    threads = [threading.Thread(target=request) for _ in range(AT_ONCE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_after_every_session_is_cut_each_request_once_the_database_answers_is_served(
    launcher: Launcher, graph: Path, url: str, proxy: Proxy
) -> None:
    served = launcher.serve(graph, None, "--db", through(url, proxy))
    status, _ = served.request("POST", "/tokens", {"token": "ORDER-1", "context": {"title": "x"}})
    assert status == 201
    fill_pool(lambda: served.request("GET", "/tokens/ORDER-1"))

    proxy.down()
    time.sleep(1.5)
    proxy.up()

    answers = [served.request("GET", "/tokens/ORDER-1")[0] for _ in range(2 * AT_ONCE)]
    fired = served.request("POST", "/tokens/ORDER-1/events/submitted")
    assert answers == [200] * (2 * AT_ONCE)
    assert fired[0] == 200 and fired[1]["state"] == "review", fired
    assert served.stop() == 0
    assert any("took the serving lock again" in line for line in served.lines), served.lines


def test_a_serve_that_finds_another_control_plane_on_the_row_when_it_reconnects_serves_nothing(
    launcher: Launcher, graph: Path, url: str, proxy: Proxy
) -> None:
    served = launcher.serve(graph, None, "--db", through(url, proxy))
    status, _ = served.request("POST", "/tokens", {"token": "ORDER-1", "context": {"title": "x"}})
    assert status == 201
    fill_pool(lambda: served.request("GET", "/tokens/ORDER-1"))

    proxy.down()
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("UPDATE control_plane SET serving = 'elsewhere:1:0a0b0c0d'")
    proxy.up()

    answers: set[Any] = set()
    deadline = time.monotonic() + 10
    while served.process.poll() is None and time.monotonic() < deadline:
        try:
            status, body = served.request("GET", "/tokens/ORDER-1")
        except OSError:
            break
        answers.add(status if status == 200 else (status, body["code"]))
    assert served.process.wait(timeout=10) == 1
    assert answers <= {(503, "database_busy"), (503, "not_serving")}, answers
    assert served.rest()[-1] == (
        "error: another control plane served the database while this one could not reach it; "
        "this control plane stopped"
    )


MULTI = "postgresql://app:s3cret@db1:5432,db2:5433/orders?target_session_attrs=read-write"


def test_a_multi_host_url_is_taken_by_serve_shown_without_its_password_and_passed_to_pg_dump() -> (
    None
):
    check_url(MULTI)
    assert without_password(MULTI) == (
        "postgresql://app@db1:5432,db2:5433/orders?target_session_attrs=read-write"
    )
    settings = dump_settings(MULTI)
    assert settings.environment == {
        "PGHOST": "db1,db2",
        "PGPORT": "5432,5433",
        "PGDATABASE": "orders",
        "PGUSER": "app",
        "PGPASSWORD": "s3cret",
        "PGTARGETSESSIONATTRS": "read-write",
    }
    assert "s3cret" not in settings.shown and settings.unpassable == ()
